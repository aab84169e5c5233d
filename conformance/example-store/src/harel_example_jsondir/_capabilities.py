"""The capabilities jsondir declares (its own module so the plugin imports no IO code)."""

from harel.store.contract import Capabilities

CAPABILITIES = Capabilities(
    persistent=True,  # files on disk survive the process
    multi_process=True,  # every operation holds a file lock on the directory
    ordered_listing=True,  # listing sorts by id
    exact_pages=True,  # filters run before the page is cut
)
