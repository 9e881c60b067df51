"""The transaction coordinator (KIP-98): a sans-IO core (``coordinator``), the records of
``__transaction_state`` (``log_records``), and the trio shell that persists and sends its
effects (``service``, ``markers``)."""
