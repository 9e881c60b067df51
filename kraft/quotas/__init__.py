"""Client quotas with Kafka's semantics (its ClientQuotaManager and ClientRequestQuotaManager):
which quota applies to a connection (``entities``), the sampled rate a quota bounds
(``rate``), and the decisions to throttle (``manager``).  No I/O: the broker's trio shell
(``broker.client_quotas``) records what connections do and applies the decisions."""
