"""kraft.local_cluster: the ports it hands to nodes."""

import socket

from kraft.local_cluster import _ephemeral_low, free_port


def test_free_ports_are_bindable_and_below_the_ephemeral_range():
    """A port in the ephemeral range could become some outgoing connection's local port
    before the node binds it."""
    low = _ephemeral_low()
    for _ in range(50):
        port = free_port()
        assert 1024 < port < low - 1000  # the pysyncobj engine also uses port + 1000
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))



def test_free_ports_are_never_handed_out_twice():
    """A cluster's ports are all chosen before any node binds one: two draws of the same
    port (or of a port and its pysyncobj pair, port + 1000) would leave a node unable to
    start.  4,000 draws from about 21,000 ports would repeat one almost surely."""
    from kraft.local_cluster import _PYSYNCOBJ_OFFSET

    ports = [free_port() for _ in range(4000)]
    assert len(set(ports)) == len(ports)
    taken = set(ports)
    assert not any(p + _PYSYNCOBJ_OFFSET in taken for p in ports)


def _held_port() -> socket.socket:
    """A listening socket on a port free_port handed out: the node's address is taken."""
    s = socket.socket()
    s.bind(("127.0.0.1", free_port()))
    s.listen()
    return s


def _start_and_wait_for_exit(cluster, timeout_s: float = 60) -> str:
    cluster.format()
    cluster.start_all()
    (node,) = cluster.nodes.values()
    assert node.process.wait(timeout=timeout_s) == 1
    return node.log_path.read_text()


def test_a_taken_listener_port_stops_the_node_with_one_line(make_cluster):
    """Kafka's "Socket server failed to bind": the node exits 1 naming the listener and the
    address, not with a traceback."""
    with _held_port() as held:
        port = held.getsockname()[1]
        cluster = make_cluster(controllers=1, brokers=0, first_broker_port=port)
        log = _start_and_wait_for_exit(cluster)
    assert f"Error: listener PLAINTEXT: cannot listen on 127.0.0.1:{port}: Address already in use" in log
    assert "Traceback" not in log


def test_a_taken_metrics_port_stops_the_node_with_one_line(make_cluster):
    with _held_port() as held:
        port = held.getsockname()[1]
        cluster = make_cluster(controllers=1, brokers=0)
        next(iter(cluster.nodes.values())).metrics_port = port
        log = _start_and_wait_for_exit(cluster)
    assert f"Error: kraft.metrics.port: cannot listen on 127.0.0.1:{port}: Address already in use" in log
    assert "Traceback" not in log
