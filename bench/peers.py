"""The seed paper's peers, RabbitMQ and ActiveMQ, from Debian's packages, on loopback.

Each broker runs as a child process of the benchmark in a temporary directory of its own
(its own data, logs and ports; the system services stay untouched), and is stopped by its
pid.  ``ensure_*`` installs what is missing (``apt-get install rabbitmq-server activemq``,
``pip install pika stomp.py``); every failure is returned as a reason string for the
results table rather than raised.

Persistence, comparable to kraft's defaults (records written to the OS on every produce,
fsync left to the OS / to replication; ``log.flush.interval.messages`` is unbounded):

* RabbitMQ: a durable classic queue and persistent messages (``delivery_mode=2``); RabbitMQ
  writes them to its message store and fsyncs in groups of its own choosing.  No publisher
  confirms: the producer is asynchronous, as in the paper.
* ActiveMQ: persistent messages into KahaDB, its default store, with
  ``journalDiskSyncStrategy="periodic"`` (fsync once a second instead of KahaDB's default
  ``always``, which fsyncs every persistent send; ``--activemq-sync always`` restores it).
  STOMP SEND frames without a receipt header: the producer does not wait for the broker
  (asynchronous, as in the paper); one SEND with a receipt at the end stops the clock.
* Consumers use automatic acknowledgement (RabbitMQ ``auto_ack`` with prefetch, ActiveMQ
  ``ack:auto``): a Kafka consumer acknowledges nothing per record either.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout_s: float, proc: subprocess.Popen | None = None) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return True
        except OSError:
            time.sleep(0.3)
    return False


def _apt_install(*packages: str) -> str | None:
    """None when installed, else why not."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], check=False,
                           capture_output=True, text=True, timeout=900, env=env)
        if r.returncode != 0:
            subprocess.run(["apt-get", "update"], check=False, capture_output=True, timeout=300)
            r = subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", *packages], check=False,
                               capture_output=True, text=True, timeout=900, env=env)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"apt-get install {' '.join(packages)} failed: {exc}"
    if r.returncode != 0:
        return f"apt-get install {' '.join(packages)} failed: {r.stderr.strip().splitlines()[-1:]}"
    return None


def _pip_install(module: str, package: str) -> str | None:
    try:
        __import__(module)
        return None
    except ImportError:
        pass
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=False, capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        return f"pip install {package} failed: {r.stderr.strip()[-200:]}"
    return None


class Peer:
    name = "?"

    def __init__(self, base: Path):
        self.base = base
        self.proc: subprocess.Popen | None = None
        self.port: int | None = None
        self.error: str | None = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class RabbitMQ(Peer):
    name = "RabbitMQ"
    server = "/usr/lib/rabbitmq/bin/rabbitmq-server"

    def start(self) -> bool:
        if not Path(self.server).exists():
            self.error = _apt_install("rabbitmq-server")
            if self.error or not Path(self.server).exists():
                self.error = self.error or "rabbitmq-server is not installed"
                return False
        self.error = _pip_install("pika", "pika")
        if self.error:
            return False
        self.base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        dist_port = free_port()
        env = dict(os.environ,
                   RABBITMQ_NODENAME=f"kraftbench{self.port}@localhost",
                   RABBITMQ_NODE_IP_ADDRESS="127.0.0.1", RABBITMQ_NODE_PORT=str(self.port),
                   RABBITMQ_DIST_PORT=str(dist_port),
                   RABBITMQ_MNESIA_BASE=str(self.base / "mnesia"), RABBITMQ_LOG_BASE=str(self.base / "log"),
                   RABBITMQ_PID_FILE=str(self.base / "rabbit.pid"),
                   RABBITMQ_CONFIG_FILE=str(self.base / "rabbitmq"),
                   RABBITMQ_ENABLED_PLUGINS_FILE=str(self.base / "enabled_plugins"),
                   RABBITMQ_ENABLED_PLUGINS="",
                   RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}",
                   ERL_EPMD_ADDRESS="127.0.0.1", HOME=str(self.base))
        # the default vm_memory_high_watermark (40%) on a shared machine can block publishers
        (self.base / "rabbitmq.conf").write_text(
            "loopback_users = none\nvm_memory_high_watermark.absolute = 1GB\n"
            "disk_free_limit.absolute = 50MB\n")
        (self.base / "enabled_plugins").write_text("[].\n")
        log = open(self.base / "server.out", "wb")  # noqa: SIM115 - handed to the child, closed below
        self.proc = subprocess.Popen([self.server], env=env, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, cwd=self.base, start_new_session=True)
        log.close()
        if not wait_port(self.port, 90, self.proc):
            tail = (self.base / "server.out").read_text(errors="replace").strip().splitlines()[-3:]
            self.error = f"RabbitMQ did not start: {' | '.join(tail)}"
            self.stop()
            return False
        return True

    def stop(self) -> None:
        # rabbitmq-server's shell runs beam.smp as a child; terminate the whole group it leads
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
                self.proc.wait(timeout=30)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(self.proc.pid, 9)
                except ProcessLookupError:
                    pass
                self.proc.wait()

    # -- tests ------------------------------------------------------------------------

    def produce(self, queue: str, count: int, size: int, timeout_s: float) -> dict:
        import pika

        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
        ch = conn.channel()
        ch.queue_declare(queue=queue, durable=True)
        body = b"x" * size
        props = pika.BasicProperties(delivery_mode=2)
        cpu0 = time.process_time()
        start = time.perf_counter()
        deadline = start + timeout_s
        sent = 0
        while sent < count and (sent & 0xFF or time.perf_counter() < deadline):
            ch.basic_publish("", queue, body, props)
            sent += 1
        # asynchronous: the publisher does not wait per message; a final round trip (a
        # passive declare) makes sure the broker has taken everything before the clock stops
        ch.queue_declare(queue=queue, durable=True, passive=True)
        elapsed = time.perf_counter() - start
        conn.close()
        return {"records": sent, "elapsed_s": elapsed, "records_per_s": sent / elapsed,
                "mb_per_s": sent * size / elapsed / 1e6, "timed_out": sent < count,
                "client_cpu_cores": (time.process_time() - cpu0) / elapsed}

    def consume(self, queue: str, count: int, size: int, timeout_s: float) -> dict:
        import pika

        conn = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", self.port))
        ch = conn.channel()
        got = 0
        nbytes = 0
        cpu0 = time.process_time()
        start = time.perf_counter()
        deadline = start + timeout_s
        for method, _props, body in ch.consume(queue, auto_ack=True, inactivity_timeout=5):
            if method is None or time.perf_counter() > deadline:
                break
            got += 1
            nbytes += len(body)
            if got >= count:
                break
        elapsed = time.perf_counter() - start
        ch.cancel()
        conn.close()
        return {"records": got, "elapsed_s": elapsed, "records_per_s": got / elapsed,
                "mb_per_s": nbytes / elapsed / 1e6, "timed_out": got < count,
                "client_cpu_cores": (time.process_time() - cpu0) / elapsed}


ACTIVEMQ_XML = """<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="kraftbench"
          persistent="true" dataDirectory="{data}">
    <persistenceAdapter><kahaDB directory="{data}/kahadb" journalDiskSyncStrategy="{sync}"/></persistenceAdapter>
    <systemUsage><systemUsage>
      <memoryUsage><memoryUsage limit="256 mb"/></memoryUsage>
      <storeUsage><storeUsage limit="4 gb"/></storeUsage>
      <tempUsage><tempUsage limit="1 gb"/></tempUsage>
    </systemUsage></systemUsage>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:{port}"/>
    </transportConnectors>
  </broker>
</beans>
"""


class ActiveMQ(Peer):
    name = "ActiveMQ"
    jar = "/usr/share/activemq/bin/activemq.jar"

    def __init__(self, base: Path, sync: str = "periodic"):
        super().__init__(base)
        self.sync = sync  # KahaDB journalDiskSyncStrategy: always (its default), periodic, never

    def start(self) -> bool:
        if not Path(self.jar).exists() or shutil.which("java") is None:
            self.error = _apt_install("activemq")
            if self.error or not Path(self.jar).exists():
                self.error = self.error or "activemq is not installed"
                return False
        self.error = _pip_install("stomp", "stomp.py")
        if self.error:
            return False
        self.base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = self.base / "conf"
        conf.mkdir(exist_ok=True)
        (conf / "activemq.xml").write_text(
            ACTIVEMQ_XML.format(data=self.base / "data", port=self.port, sync=self.sync))
        log4j = Path("/etc/activemq/instances-available/main/log4j2.properties")
        if log4j.exists():
            shutil.copy(log4j, conf / "log4j2.properties")
        cmd = ["java", "-Xms512M", "-Xmx512M", "-Dorg.apache.activemq.UseDedicatedTaskRunner=true",
               "-Dactivemq.home=/usr/share/activemq", f"-Dactivemq.base={self.base}",
               f"-Dactivemq.conf={conf}", f"-Dactivemq.data={self.base / 'data'}",
               f"-Dlog4j.configurationFile={conf / 'log4j2.properties'}",
               "-jar", self.jar, "start", f"xbean:file:{conf / 'activemq.xml'}"]
        log = open(self.base / "server.out", "wb")  # noqa: SIM115 - handed to the child, closed below
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=self.base, start_new_session=True)
        log.close()
        if not wait_port(self.port, 120, self.proc):
            tail = (self.base / "server.out").read_text(errors="replace").strip().splitlines()[-3:]
            self.error = f"ActiveMQ did not start: {' | '.join(tail)}"
            self.stop()
            return False
        return True

    def _connect(self):
        import stomp

        conn = stomp.Connection12([("127.0.0.1", self.port)], heartbeats=(0, 0))
        conn.connect(wait=True)
        return conn

    def produce(self, queue: str, count: int, size: int, timeout_s: float) -> dict:
        conn = self._connect()
        body = b"x" * size
        dest = f"/queue/{queue}"
        headers = {"persistent": "true"}
        cpu0 = time.process_time()
        start = time.perf_counter()
        deadline = start + timeout_s
        sent = 0
        while sent < count and (sent & 0xFF or time.perf_counter() < deadline):
            conn.send(dest, body, headers=headers)
            sent += 1
        # one SEND with a receipt at the end: the broker has handled everything before it
        conn.send(dest, body, headers={"persistent": "true", "receipt": "last"})
        sent += 1
        conn.disconnect(receipt="bye")  # waits for the broker's receipt
        elapsed = time.perf_counter() - start
        return {"records": sent, "elapsed_s": elapsed, "records_per_s": sent / elapsed,
                "mb_per_s": sent * size / elapsed / 1e6, "timed_out": sent < count,
                "client_cpu_cores": (time.process_time() - cpu0) / elapsed}

    def consume(self, queue: str, count: int, size: int, timeout_s: float) -> dict:
        import threading

        import stomp

        state = {"n": 0, "bytes": 0, "last_id": None}
        done = threading.Event()
        conn = self._connect()

        class Listener(stomp.ConnectionListener):
            def on_message(self, frame):
                state["n"] += 1
                state["bytes"] += len(frame.body)
                if state["n"] >= count:
                    done.set()

        conn.set_listener("l", Listener())
        cpu0 = time.process_time()
        start = time.perf_counter()
        conn.subscribe(f"/queue/{queue}", id="1", ack="auto", headers={"activemq.prefetchSize": "1000"})
        last, last_change = -1, time.perf_counter()
        deadline = start + timeout_s
        while not done.wait(0.2):
            now = time.perf_counter()
            if state["n"] != last:
                last, last_change = state["n"], now
            if now > deadline or now - last_change > 5:
                break  # time is up, or nothing arrived for 5 s
        elapsed = time.perf_counter() - start
        try:
            conn.disconnect()
        except Exception:  # noqa: BLE001, S110 - the broker may already have closed it
            pass
        n = state["n"]
        return {"records": n, "elapsed_s": elapsed, "records_per_s": n / elapsed,
                "mb_per_s": state["bytes"] / elapsed / 1e6, "timed_out": n < count,
                "client_cpu_cores": (time.process_time() - cpu0) / elapsed}
