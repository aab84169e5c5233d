"""What every backend would otherwise rewrite: codec, commit envelope, trace and listing
policy, URL parsing and redaction, connect retries.

Private to harel-core: a backend imports these rules through the store-author API,
:mod:`harel.store.author` (``docs/store-author-api.md``), whose names stay stable; the modules
here may be split, merged or renamed in any release."""
