"""ACL authorization, sans-IO: Kafka's ACL model and StandardAuthorizer's decision rules.

An ACL (``AclBinding``) says that a principal, from a host, may (ALLOW) or may not (DENY)
perform an operation on resources named by a pattern: LITERAL (one name, or ``*`` for every
name) or PREFIXED (every name starting with it).  ``Authorizer.authorize`` decides one
action as Kafka's StandardAuthorizer does:

- a super user (``super.users``) may do anything;
- the ACLs that apply are those whose pattern matches the resource and whose principal is
  the caller's or ``User:*`` and whose host is the caller's address or ``*``;
- a DENY that applies wins over any ALLOW; then an ALLOW that applies allows;
- an ALLOW of READ, WRITE, DELETE or ALTER implies DESCRIBE, and one of ALTER_CONFIGS
  implies DESCRIBE_CONFIGS (a DENY implies nothing); ALL stands for every operation;
- when no ACL at all names the resource (whoever it is for), the answer is
  ``allow.everyone.if.no.acl.found`` (default false); otherwise it is a denial.

The ACLs come from the metadata image (``MetadataImage.acls``: id -> AclBinding);
``AclIndex`` arranges them for lookups and is rebuilt only when that mapping changes.
The enums carry Kafka's wire codes (CreateAcls, the AccessControlEntryRecord).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Iterable, Mapping

WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one name of the CLUSTER resource
# authorizer.class.name values that turn authorization on (Kafka's, and a short alias)
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
AUTHORIZER_NAMES = frozenset({STANDARD_AUTHORIZER, "StandardAuthorizer", "standard"})


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class PermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


Op = AclOperation
# What an ALLOW of each operation also allows (a DENY denies only what it names).
_IMPLIED_BY = {Op.DESCRIBE: frozenset({Op.DESCRIBE, Op.READ, Op.WRITE, Op.DELETE, Op.ALTER}),
               Op.DESCRIBE_CONFIGS: frozenset({Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS})}

# The operations each resource type has (Kafka's AclEntry.supportedOperations): the bits of
# the *_authorized_operations fields that Metadata and DescribeGroups/Cluster answer.
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (Op.READ, Op.WRITE, Op.CREATE, Op.DESCRIBE, Op.DELETE, Op.ALTER,
                         Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),
    ResourceType.GROUP: (Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS),  # + group configs
    ResourceType.CLUSTER: (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                           Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (Op.DESCRIBE, Op.WRITE),
    ResourceType.DELEGATION_TOKEN: (Op.DESCRIBE,),
    ResourceType.USER: (Op.CREATE_TOKENS, Op.DESCRIBE_TOKENS),
}


def every_operation(resource_type: ResourceType) -> int:
    """The authorized-operations field with every operation of ``resource_type``: what Kafka
    answers without an authorizer (topic 3576, group 3400, cluster 8096)."""
    return sum(1 << op for op in SUPPORTED_OPERATIONS.get(resource_type, ()))


class AclError(ValueError):
    """An ACL or filter that cannot be: Kafka answers INVALID_REQUEST."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType

    @classmethod
    def of(cls, resource_type, resource_name, pattern_type, principal, host, operation, permission):
        """From wire or record fields (ints or enum members); unknown codes become UNKNOWN."""
        return cls(_enum(ResourceType, resource_type), resource_name, _enum(PatternType, pattern_type),
                   principal, host, _enum(AclOperation, operation), _enum(PermissionType, permission))

    def validate(self) -> None:
        """Kafka's checks of a new ACL (AclControlManager.validateNewAcl and AclApis)."""
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise AclError(f"Invalid resourceType {self.resource_type.name}")
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise AclError(f"Invalid patternType {self.pattern_type.name}")
        if self.operation in (Op.UNKNOWN, Op.ANY):
            raise AclError(f"Invalid operation {self.operation.name}")
        if self.permission not in (PermissionType.ALLOW, PermissionType.DENY):
            raise AclError(f"Invalid permissionType {self.permission.name}")
        if not self.resource_name:
            raise AclError("Resource name should not be empty")
        if self.resource_type == ResourceType.CLUSTER and self.resource_name != CLUSTER_NAME:
            raise AclError(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        kind, sep, name = (self.principal or "").partition(":")
        if not sep or not kind or not name:
            raise AclError(f"Invalid principal {self.principal!r}: expected Type:name, e.g. User:alice")
        if not self.host:
            raise AclError("Host should not be empty (use * for every host)")

    def __str__(self) -> str:  # as kafka-acls.sh prints an entry
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission.name})")


@dataclass(frozen=True, slots=True)
class AclFilter:
    """DescribeAcls/DeleteAcls's filter: None or ANY matches anything; pattern type MATCH
    matches the ACLs that would apply to the resource named (literal, ``*`` and prefixes)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = Op.ANY
    permission: PermissionType = PermissionType.ANY

    @classmethod
    def of(cls, resource_type, resource_name, pattern_type, principal, host, operation, permission):
        return cls(_enum(ResourceType, resource_type), resource_name, _enum(PatternType, pattern_type),
                   principal, host, _enum(AclOperation, operation), _enum(PermissionType, permission))

    def validate(self) -> None:
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            raise AclError("Unknown patternFilter.")
        if self.operation == Op.UNKNOWN or self.permission == PermissionType.UNKNOWN:
            raise AclError("Unknown entryFilter.")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == Op.ANY or self.operation == acl.operation)
                and (self.permission == PermissionType.ANY or self.permission == acl.permission))

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            name = self.resource_name
            if name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (name, WILDCARD)
            return acl.pattern_type == PatternType.PREFIXED and name.startswith(acl.resource_name)
        if self.pattern_type != PatternType.ANY and self.pattern_type != acl.pattern_type:
            return False
        return self.resource_name is None or self.resource_name == acl.resource_name


ANY_ACL = AclFilter()


def _enum(kind, value):
    try:
        return kind(value)
    except ValueError:
        return kind(0)


class AclIndex:
    """ACLs arranged by resource: literal ones (``*`` included) by (type, name), prefixed
    ones by (type, prefix), so a decision looks up a name and its prefixes, not every ACL."""

    __slots__ = ("literal", "prefixed", "types")

    def __init__(self, acls: Iterable[AclBinding]):
        self.literal: dict[tuple[int, str], list[AclBinding]] = {}
        self.prefixed: dict[tuple[int, str], list[AclBinding]] = {}
        self.types: dict[int, list[AclBinding]] = {}  # by resource type, for authorize_any
        for acl in acls:
            table = self.literal if acl.pattern_type == PatternType.LITERAL else self.prefixed
            table.setdefault((acl.resource_type, acl.resource_name), []).append(acl)
            self.types.setdefault(acl.resource_type, []).append(acl)

    def applicable(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """Every ACL whose pattern matches the resource, whoever it is for."""
        out = list(self.literal.get((resource_type, name), ()))
        if name != WILDCARD:
            out.extend(self.literal.get((resource_type, WILDCARD), ()))
        if self.prefixed:
            for end in range(1, len(name) + 1):
                out.extend(self.prefixed.get((resource_type, name[:end]), ()))
        return out


EMPTY_INDEX = AclIndex(())


def _applies(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> bool:
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    if acl.operation == Op.ALL:
        return True
    if acl.permission == PermissionType.ALLOW:
        implied = _IMPLIED_BY.get(operation)
        return acl.operation in implied if implied is not None else acl.operation == operation
    return acl.operation == operation


def parse_super_users(text: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:admin;User:CN=broker``)."""
    return frozenset(p.strip() for p in (text or "").split(";") if p.strip())


class Authorizer:
    """Decides actions against an ``AclIndex``; holds the two settings that are not ACLs."""

    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acl: bool = False):
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl

    def authorize(self, index: AclIndex, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        acls = index.applicable(resource_type, name)
        if not acls:
            return self.allow_if_no_acl
        allowed = False
        for acl in acls:
            if _applies(acl, principal, host, operation):
                if acl.permission == PermissionType.DENY:
                    return False
                allowed = True
        return allowed

    def authorize_any(self, index: AclIndex, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """May ``principal`` do ``operation`` on *some* resource of the type (Kafka's
        authorizeByResourceType: an idempotent producer without IDEMPOTENT_WRITE may still
        get a producer id if it may write to some topic)?  True when an ALLOW applies to a
        pattern that no DENY covers: a DENY of ``*``, of the same literal name, or of a
        prefix of the allowed pattern's name."""
        if principal in self.super_users:
            return True
        acls = [a for a in index.types.get(resource_type, ()) if _exact_op_applies(a, principal, host, operation)]
        if not acls:
            return self.allow_if_no_acl and not index.types.get(resource_type)
        denies = [a for a in acls if a.permission == PermissionType.DENY]
        if any(d.pattern_type == PatternType.LITERAL and d.resource_name == WILDCARD for d in denies):
            return False
        for allow in (a for a in acls if a.permission == PermissionType.ALLOW):
            if not any(_covers(d, allow) for d in denies):
                return True
        return False

    def authorized_operations(self, index: AclIndex, principal: str, host: str,
                              resource_type: ResourceType, name: str) -> int:
        """The 32-bit field of the operations allowed on the resource (Kafka's
        authorizedOperations: bit ``code`` set for each)."""
        bits = 0
        for op in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(index, principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits

    def acls(self, acls: Iterable[AclBinding], flt: AclFilter = ANY_ACL) -> list[AclBinding]:
        return [a for a in acls if flt.matches(a)]


def _exact_op_applies(acl: AclBinding, principal: str, host: str, operation: AclOperation) -> bool:
    return (acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)
            and acl.operation in (operation, Op.ALL))


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Does ``deny`` deny everything ``allow`` allows?"""
    if deny.pattern_type == PatternType.LITERAL:
        return allow.pattern_type == PatternType.LITERAL and deny.resource_name == allow.resource_name
    return allow.resource_name.startswith(deny.resource_name)


def index_of(acls: Mapping) -> AclIndex:
    return AclIndex(acls.values()) if acls else EMPTY_INDEX
