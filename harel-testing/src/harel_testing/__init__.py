"""Test-only support for harel stores: what the backends' tests run against, kept out of the
runtime wheels.

One sub-module per backend (plus the lease scenario), each importable once its extra is installed
(``pip install harel-testing[rqlite]``, ``[dynamodb]``, ``[mongo]``, ``[redis]``):

* :mod:`harel_testing.rqlite` — ``FakeRqlite``, one rqlite node's HTTP API over a SQLite file;
* :mod:`harel_testing.dynamodb` — ``MotoServer`` / ``moto_endpoint``, moto's DynamoDB served
  over HTTP (the store's ``local=moto`` option uses it);
* :mod:`harel_testing.mongo` — ``violations``, what a MongoDB server refuses that mongomock
  accepts (the mongo plan tests lint every request with it);
* :mod:`harel_testing.leases` — ``run_lease_scenario`` / ``arun_lease_scenario``, the
  ``list_leases`` scenario the backends' ``test_leases.py`` run (no extra needed);
* :mod:`harel_testing.redis` — ``RedisServerProcess`` / ``RedisClusterProcess``, private
  ``redis-server`` processes and clusters.

A backend's ``testing`` module imports these only when used; without this distribution it
raises :class:`harel.store.errors.HarelTestingNotInstalled` with the ``pip install`` line.
"""
