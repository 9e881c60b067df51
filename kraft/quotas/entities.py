"""Quota entities, keys and Kafka's order of precedence.

An entity is a sorted tuple of ``(entity type, name)`` pairs, as the metadata image keys
them; a name of None is the ``<default>`` entity.  ``resolve`` finds the quota that applies
to a connection of ``user`` with ``client_id`` for one key: the most specific configured
entity, in the order Kafka documents (its ClientQuotaManager):

    user + client-id, user + default client-id, user,
    default user + client-id, default user + default client-id, default user,
    client-id, default client-id

Each key resolves on its own (a user's producer_byte_rate does not hide a client-id's
consumer_byte_rate), because Kafka keeps one manager per quota type.
"""

from __future__ import annotations

from typing import Mapping

USER, CLIENT_ID, IP = "user", "client-id", "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Key -> whether its value must be integral (Kafka's LONG/INT config types), per entity kind.
CLIENT_KEYS: Mapping[str, bool] = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                                   REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}
IP_KEYS: Mapping[str, bool] = {CONNECTION_CREATION_RATE: True}

Entity = tuple[tuple[str, "str | None"], ...]


def entity(user: object = False, client_id: object = False) -> Entity:
    """The entity key for a user and/or client id; pass None for ``<default>``, leave one
    out (False) for an entity without that type."""
    pairs = []
    if client_id is not False:
        pairs.append((CLIENT_ID, client_id))
    if user is not False:
        pairs.append((USER, user))
    return tuple(pairs)


def precedence(user: str, client_id: str) -> tuple[Entity, ...]:
    """The entities that may set a connection's quota, most specific first.  As Kafka, an
    empty client id matches only user entities, and an empty user only client-id ones."""
    if not client_id:
        return (entity(user), entity(None)) if user else ()
    if not user:
        return entity(client_id=client_id), entity(client_id=None)
    return (
        entity(user, client_id), entity(user, None), entity(user),
        entity(None, client_id), entity(None, None), entity(None),
        entity(client_id=client_id), entity(client_id=None),
    )


def resolve(quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str,
            client_id: str) -> tuple[Entity, float] | None:
    """The entity whose ``key`` applies to (``user``, ``client_id``) and its value, or None
    when no quota applies (the connection is not limited)."""
    for candidate in precedence(user, client_id):
        values = quotas.get(candidate)
        if values is not None and key in values:
            return candidate, values[key]
    return None


def shared_by(matched: Entity, user: str, client_id: str) -> tuple[str, str]:
    """Which connections share one measured rate (Kafka's quota metric tags): all that
    resolve to the same configured entity and agree on the parts of it that name them.  A
    quota on a user is shared by all of that user's clients; one on ``<default>`` user is
    measured per user; one on a client id by every user's connections with that id."""
    types = {t for t, _ in matched}
    return (user if USER in types else "", client_id if CLIENT_ID in types else "")


def sort_key(entity_key: Entity) -> tuple:
    """Orders entities by type, then ``<default>`` before names."""
    return tuple((t, n is not None, n or "") for t, n in entity_key)


def describe(entity_key: Entity) -> str:
    """``user 'alice', client-id <default>``: for messages and the CLI."""
    return ", ".join(f"{t} {'<default>' if n is None else repr(n)}" for t, n in entity_key)
