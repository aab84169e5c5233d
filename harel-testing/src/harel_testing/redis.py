"""Private Redis servers for tests: a ``redis-server`` process, a Redis Cluster of them.

Test support (``pip install harel-testing[redis]``; the ``redis-server`` and ``redis-cli``
binaries come from the system, e.g. ``apt-get install redis-server``): the backend's tests start
these to stop, restart, flush or fail over a server without touching the shared one.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis


def terminate(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM a running server process and wait for it (SIGKILL after 20 s)."""
    if process is None or process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


class RedisServerProcess:
    """A private ``redis-server`` on a free loopback port (and a unix socket), append-only file
    fsynced on every write, for tests that stop, restart or flush a server.

    ``start()`` waits until it answers (after a restart: until it has loaded its data);
    ``stop()`` shuts it down (SIGTERM); ``remove()`` also deletes its socket directory.  Its
    data directory is ``workdir``, so a restart on the same port finds the same data.
    """

    def __init__(self, workdir: Path, *, password: str | None = None) -> None:
        self.workdir = Path(workdir)
        self.password = password
        self.port = free_port()
        # a short path: unix socket paths are limited to about 100 bytes
        self.socket = Path(tempfile.mkdtemp(prefix="harel-redis-")) / "s.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<port>/0`` (no credentials)."""
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout: float = 20.0) -> None:
        """Start the server and wait until it answers ``PING``."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed (apt-get install redis-server)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        command = [
            binary,
            *("--bind", "127.0.0.1", "--port", str(self.port)),
            *("--unixsocket", str(self.socket), "--unixsocketperm", "700"),
            *("--dir", str(self.workdir), "--save", ""),
            *("--appendonly", "yes", "--appendfsync", "always"),
            *("--daemonize", "no", "--loglevel", "warning", "--protected-mode", "no"),
        ]
        if self.password is not None:
            command += ["--requirepass", self.password]
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.client() as client:
                    client.ping()
                return
            except redis.RedisError:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"redis-server exited with status {self.process.returncode}"
                    ) from None
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"redis-server did not answer within {timeout} s") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """Shut the server down (its append-only file keeps the data)."""
        process, self.process = self.process, None
        terminate(process)

    def remove(self) -> None:
        """Stop the server and delete its socket directory."""
        self.stop()
        shutil.rmtree(self.socket.parent, ignore_errors=True)

    def client(self) -> redis.Redis:
        """A plain redis-py client of this server."""
        return redis.Redis(port=self.port, password=self.password, socket_connect_timeout=0.5)


def free_port() -> int:
    """A loopback TCP port nothing listens on (right now)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


CLUSTER_NODE_TIMEOUT_MS = 1000
"""``cluster-node-timeout`` of a test cluster: a stopped master is marked failed (and its
replica elected) within a few seconds."""


class RedisClusterProcess:
    """A private Redis Cluster on loopback ports: ``masters`` masters, each with ``replicas``
    replicas, started from the same ``redis-server`` binary as :class:`RedisServerProcess`
    (``--cluster-enabled yes``), joined with ``redis-cli --cluster create`` and torn down by
    :meth:`remove`.

    Every node has its own data directory under ``workdir`` and a free client port and cluster
    bus port (``cluster-port``).  ``cluster-require-full-coverage no``: while a master is down
    only its slots refuse commands, the others go on.  No persistence (replication is what a
    failover relies on).
    """

    def __init__(self, workdir: Path, *, masters: int = 3, replicas: int = 1) -> None:
        self.workdir = Path(workdir)
        self.masters = masters
        self.replicas = replicas
        self.ports: list[int] = []
        self.processes: dict[int, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:<first node>/0?cluster=yes`` (the client discovers the rest)."""
        return f"redis://127.0.0.1:{self.ports[0]}/0?cluster=yes"

    def _binary(self, name: str) -> str:
        found = shutil.which(name)
        if found is None:
            raise RuntimeError(f"{name} is not installed (apt-get install redis-server)")
        return found

    def _start_node(self, port: int, bus_port: int) -> None:
        directory = self.workdir / f"node-{port}"
        directory.mkdir(parents=True, exist_ok=True)
        command = [
            self._binary("redis-server"),
            *("--bind", "127.0.0.1", "--port", str(port), "--cluster-port", str(bus_port)),
            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            *("--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)),
            *("--cluster-require-full-coverage", "no"),
            *("--cluster-replica-validity-factor", "0"),
            *("--dir", str(directory), "--save", "", "--appendonly", "no"),
            *("--daemonize", "no", "--loglevel", "warning", "--protected-mode", "no"),
        ]
        self.processes[port] = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def start(self, timeout: float = 60.0) -> None:
        """Start every node, join them into one cluster and wait until it serves every slot
        and every replica is in sync (``RuntimeError`` when it does not within ``timeout``)."""
        deadline = time.monotonic() + timeout
        count = self.masters * (1 + self.replicas)
        try:
            for _ in range(count):
                self.ports.append(self._start_on_free_ports(deadline))
            if self.masters < 3:  # redis-cli creates clusters of 3 masters or more
                self._join_by_hand(deadline)
                self.wait_healthy(deadline - time.monotonic())
                return
            create = [
                self._binary("redis-cli"),
                "--cluster",
                "create",
                *(f"127.0.0.1:{port}" for port in self.ports),
                *("--cluster-replicas", str(self.replicas), "--cluster-yes"),
            ]
            done = subprocess.run(
                create,
                capture_output=True,
                timeout=max(deadline - time.monotonic(), 1.0),
                check=False,
            )
            if done.returncode != 0:
                raise RuntimeError(
                    f"redis-cli --cluster create failed ({done.returncode}): "
                    f"{done.stdout[-400:]!r} {done.stderr[-400:]!r}"
                )
            self.wait_healthy(deadline - time.monotonic())
        except BaseException:
            self.remove()
            raise

    def _start_on_free_ports(self, deadline: float, attempts: int = 5) -> int:
        """Start one node on a free client port and a free bus port and wait until it answers;
        a port taken between the probe and the bind (another test's connection, a node of
        another cluster) makes the node exit at once: then again on other ports."""
        for attempt in range(attempts):
            taken = set(self.ports)
            port = free_port()
            bus_port = free_port()
            if port in taken or bus_port in taken or port == bus_port:
                continue
            self._start_node(port, bus_port)
            try:
                self._wait_pong(port, deadline)
                ours = (self.workdir / f"node-{port}").resolve()
                if Path(self._answers_from(port)).resolve() == ours:
                    return port
                # another server already listened on that port, and answered
                self.processes.pop(port).kill()
                continue
            except RuntimeError:
                process = self.processes.pop(port)
                if process.poll() is None or attempt + 1 == attempts:
                    process.kill()
                    process.wait()
                    raise
        raise RuntimeError("no free ports for a cluster node")

    def _answers_from(self, port: int) -> str:
        """The data directory of the server answering on ``port``."""
        with self.node_client(port) as client:
            found: dict[str, str] = client.config_get("dir")
        return str(found.get("dir", ""))

    def _join_by_hand(self, deadline: float) -> None:
        """Fewer than 3 masters: split the slots over the masters, meet every node, and make
        the others replicas (``CLUSTER ADDSLOTSRANGE``, ``MEET``, ``REPLICATE``)."""
        masters, replicas = self.ports[: self.masters], self.ports[self.masters :]
        for index, port in enumerate(masters):
            low = index * 16384 // self.masters
            high = (index + 1) * 16384 // self.masters - 1
            with self.node_client(port) as client:
                client.execute_command("CLUSTER", "ADDSLOTSRANGE", low, high)
        with self.node_client(self.ports[0]) as first:
            for port in self.ports[1:]:
                first.execute_command("CLUSTER", "MEET", "127.0.0.1", port)
        ids = {}
        for port in masters:
            with self.node_client(port) as client:
                ids[port] = client.execute_command("CLUSTER", "MYID").decode()
        for index, port in enumerate(replicas):
            master = masters[index % len(masters)]
            while True:  # the replica must know its master before it can follow it
                try:
                    with self.node_client(port) as client:
                        client.execute_command("CLUSTER", "REPLICATE", ids[master])
                    break
                except redis.RedisError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)

    def _wait_pong(self, port: int, deadline: float) -> None:
        while True:
            try:
                with self.node_client(port) as client:
                    client.ping()
                return
            except redis.RedisError:
                process = self.processes[port]
                if process.poll() is not None:
                    raise RuntimeError(
                        f"redis-server on port {port} exited with status {process.returncode}"
                    ) from None
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {port} did not answer") from None
                time.sleep(0.05)

    def node_client(self, port: int) -> redis.Redis:
        """A plain client of one node (no cluster routing)."""
        return redis.Redis(port=port, socket_connect_timeout=0.5, socket_timeout=5)

    def running(self) -> list[int]:
        """The ports of the nodes that are still running."""
        return [port for port, process in self.processes.items() if process.poll() is None]

    def roles(self) -> dict[int, str]:
        """``port -> "master" | "slave"`` as the running nodes report themselves."""
        roles: dict[int, str] = {}
        for port in self.running():
            with self.node_client(port) as client:
                roles[port] = str(client.execute_command("ROLE")[0], "ascii")
        return roles

    def master_ports(self) -> list[int]:
        """The running masters' ports."""
        return sorted(port for port, role in self.roles().items() if role == "master")

    def master_of(self, slot: int) -> int:
        """The port of the master serving ``slot`` (as the first running node sees it)."""
        with self.node_client(self.running()[0]) as client:
            for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                if int(start) <= slot <= int(end):
                    return int(master[1])
        raise RuntimeError(f"no node serves slot {slot}")

    def wait_healthy(self, timeout: float = 30.0) -> None:
        """Wait until every running node says ``cluster_state:ok``, every slot is served by a
        running master and every running replica's link to its master is up."""
        deadline = time.monotonic() + timeout
        problem = "not checked yet"
        while time.monotonic() < deadline:
            problem = self._health()
            if not problem:
                return
            time.sleep(0.1)
        raise RuntimeError(f"the test cluster did not become healthy: {problem}")

    def _health(self) -> str:
        running = set(self.running())
        try:
            for port in running:
                with self.node_client(port) as client:
                    info = client.execute_command("CLUSTER", "INFO")
                    text = info.decode() if isinstance(info, bytes) else str(info)
                    if "cluster_state:ok" not in text:
                        return f"node {port}: cluster state not ok"
                    replication = client.info("replication")
                    if replication.get("role") == "slave" and (
                        replication.get("master_link_status") != "up"
                        or int(replication.get("master_port", 0)) not in running
                    ):
                        return f"replica {port}: link to its master is not up"
                    for start, end, master, *_ in client.execute_command("CLUSTER", "SLOTS"):
                        if int(master[1]) not in running:
                            return f"node {port}: slots {start}-{end} still on a stopped master"
        except redis.RedisError as exc:
            return f"{type(exc).__name__}: {exc}"
        return ""

    def stop_node(self, port: int) -> None:
        """Shut one node down (SIGTERM: a master first lets its replicas catch up)."""
        terminate(self.processes.get(port))

    def remove(self) -> None:
        """Stop every node and delete the data directories."""
        for port in list(self.processes):
            self.stop_node(port)
        self.processes.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)
