"""Encryption and authentication: TLS listeners and SASL (PLAIN, SCRAM-SHA-256/512).

Sans-IO cores: ``scram`` (the SCRAM math and state machines), ``sasl`` (a connection's SASL
server state machine), ``jaas`` (``sasl.jaas.config`` syntax).  ``config`` turns a node's
``server.properties`` into per-listener settings; ``tls`` builds SSL contexts and reads a
peer certificate's principal.  The trio shells are ``broker.security_shell`` (server side)
and ``kraft.client`` (client side).
"""
