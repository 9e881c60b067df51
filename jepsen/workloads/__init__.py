"""Workloads: what the clients of a jepsen run do, and how each operation reaches Kafka.

* ``queue`` -- Jepsen's Kafka workload: ``send``/``poll``/``assign``/``subscribe``/``crash``
  and a final drain (``jepsen.workloads.queue``).
* ``register`` -- read/write registers, one single-partition topic per key
  (``jepsen.workloads.register``).
* ``txn`` -- transactions of sends and polls over partitions of two topics, a
  transactional producer and a read_committed consumer (``jepsen.workloads.txn``).

A workload offers ``topics()`` (what to create), ``generator(seed)`` (a pure op source),
``open_client(...)`` and ``invoke(client, f, value)`` (one operation, run in a thread,
returning ``(type, value, error)``).  Client libraries and error classification live in
``jepsen.workloads.clients``.
"""

from jepsen.workloads.clients import CLIENTS, ClientError, classify
from jepsen.workloads.queue import QueueGenerator, QueueWorkload
from jepsen.workloads.register import RegisterGenerator, RegisterWorkload
from jepsen.workloads.txn import TxnGenerator, TxnWorkload

WORKLOADS = ("queue", "register", "txn")


def make_workload(name: str, **kwargs):
    if name == "queue":
        return QueueWorkload(**kwargs)
    if name == "register":
        return RegisterWorkload(**kwargs)
    if name == "txn":
        return TxnWorkload(**kwargs)
    raise ValueError(f"unknown workload {name!r} (one of {', '.join(WORKLOADS)})")


__all__ = ["CLIENTS", "WORKLOADS", "ClientError", "QueueGenerator", "QueueWorkload",
           "RegisterGenerator", "RegisterWorkload", "TxnGenerator", "TxnWorkload", "classify",
           "make_workload"]
