"""The BROKER_LOGGER config resource (KIP-412): a running node's log levels, read with
DescribeConfigs (``broker.config_defaults``) and changed with IncrementalAlterConfigs, as
``kafka-configs --entity-type broker-loggers --entity-name N`` does against Kafka.

Kafka's loggers are log4j's and named by class; a kraft node's are Python's ``logging``
loggers, named by module (``broker.replica_fetcher``, ``kraft.raft.driver``), with ``root``
for the root logger.  A package name (``broker``) names the parent of its modules' loggers
whether or not anything has logged through it yet, so setting its level sets every module
under it that has none of its own.  The levels are Kafka's names: TRACE (Python has none;
a level below DEBUG, which kraft does not log at), DEBUG, INFO, WARN, ERROR, FATAL.

The change applies to the node that answers (the resource name must be its id), is not
written to the metadata log, and lasts until the process ends: as in Kafka.
"""

from __future__ import annotations

import logging

from kraft.protocol.error_codes import ErrorCode

BROKER_LOGGER = 8  # ConfigResource.Type
DYNAMIC_BROKER_LOGGER_CONFIG = 6  # DescribeConfigs config source
ROOT = "root"
TRACE = 5
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations (APPEND 2 and SUBTRACT 3 are refused)

# Kafka's names (LogLevelConfig.VALID_LOG_LEVELS), most verbose first, and Python's levels
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "ERROR": logging.ERROR, "FATAL": logging.CRITICAL}
_VALID = ", ".join(sorted(LEVELS))

log = logging.getLogger(__name__)
logging.addLevelName(TRACE, "TRACE")


class LoggerConfigError(Exception):
    def __init__(self, error_code: ErrorCode, message: str):
        super().__init__(message)
        self.error_code = error_code


def level_name(level: int) -> str:
    """Kafka's name for a Python level: the most severe of its names at or below it."""
    name = "TRACE"
    for candidate, value in LEVELS.items():
        if value <= level:
            name = candidate
    return name


def _logger(name: str) -> logging.Logger:
    """The logger an existing name (``_logger_exists``) names: a package's placeholder
    becomes a logger."""
    return logging.getLogger() if name == ROOT else logging.getLogger(name)


def _effective_level(name: str, known: dict) -> int:
    """The level of the logger (or package) ``name``: its own, or its nearest ancestor's."""
    while name:
        logger = known.get(name)
        if isinstance(logger, logging.Logger) and logger.level:
            return logger.level
        name = name.rpartition(".")[0]
    return logging.getLogger().level


def loggers() -> dict[str, str]:
    """Every logger and package of loggers, with its effective level, as Kafka's
    ``Log4jController.loggers`` (kafka-configs refuses to set a logger it does not list)."""
    known = dict(logging.Logger.manager.loggerDict)
    out = {ROOT: level_name(logging.getLogger().level)}
    for name in known:
        out[name] = level_name(_effective_level(name, known))
    return out


def check_node(node_id: int, resource_name: str) -> None:
    """Raises LoggerConfigError unless ``resource_name`` is this node's id (Kafka's checks)."""
    if not resource_name:
        raise LoggerConfigError(ErrorCode.INVALID_REQUEST, "Broker id must not be empty")
    try:
        requested = int(resource_name)
    except ValueError:
        raise LoggerConfigError(ErrorCode.INVALID_REQUEST,
                                f"Node id must be an integer, but it is: {resource_name}") from None
    if requested != node_id:
        raise LoggerConfigError(ErrorCode.INVALID_REQUEST,
                                f"Unexpected broker id, expected {node_id} but received {resource_name}")


def _validate(changes: list) -> None:
    names = [c["name"] for c in changes]
    if len(set(names)) != len(names):
        raise LoggerConfigError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [c["name"] for c in changes if c["config_operation"] != DELETE and c["value"] is None]
    if nulls:
        raise LoggerConfigError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    for c in changes:
        name, op = c["name"], c["config_operation"]
        if op in (SET, DELETE) and not _logger_exists(name):
            raise LoggerConfigError(ErrorCode.INVALID_CONFIG, f"Logger {name} does not exist!")
        if op == SET:
            if c["value"] not in LEVELS:
                raise LoggerConfigError(
                    ErrorCode.INVALID_CONFIG, f"Cannot set the log level of {name} to {c['value']} as it is not "
                    f"a supported log level. Valid log levels are {_VALID}")
        elif op == DELETE:
            if name == ROOT:
                raise LoggerConfigError(ErrorCode.INVALID_REQUEST,
                                        f"Removing the log level of the {ROOT} logger is not allowed")
        else:
            kind = {2: "APPEND", 3: "SUBTRACT"}.get(op, f"Unknown operation type {op}")
            raise LoggerConfigError(ErrorCode.INVALID_REQUEST,
                                    f"{kind} operation is not allowed for the BROKER_LOGGER resource")


def _logger_exists(name: str) -> bool:
    return bool(name) and (name == ROOT or name in logging.Logger.manager.loggerDict)


def alter(node_id: int, resource: dict, validate_only: bool) -> dict:
    """An IncrementalAlterConfigs result for a BROKER_LOGGER resource: every change checked
    first (Kafka's RuntimeLoggerManager), then applied unless ``validate_only``."""
    out = {"error_code": 0, "error_message": None, "resource_type": BROKER_LOGGER,
           "resource_name": resource["resource_name"]}
    try:
        check_node(node_id, resource["resource_name"])
        _validate(resource["configs"])
    except LoggerConfigError as exc:
        out.update(error_code=int(exc.error_code), error_message=str(exc))
        return out
    if not validate_only:
        for c in resource["configs"]:
            logger = _logger(c["name"])
            if c["config_operation"] == SET:
                logger.setLevel(LEVELS[c["value"]])
                log.warning("Updated the log level of %s to %s", c["name"], c["value"])
            else:
                logger.setLevel(logging.NOTSET)
                log.warning("Unset the log level of %s", c["name"])
    return out


def names_loggers(body: dict) -> bool:
    """Whether an IncrementalAlterConfigs request names a node's loggers."""
    return any(r["resource_type"] == BROKER_LOGGER for r in body["resources"])


async def alter_configs(node_id: int, body: dict, others) -> dict:
    """An IncrementalAlterConfigs that names this node's loggers: those resources are
    changed here, as Kafka's broker and controller do, and the request's other resources go
    to ``others`` (an async callable taking the request body without the loggers: the
    controller's handling); the answer keeps the request's order."""
    local = [r for r in body["resources"] if r["resource_type"] == BROKER_LOGGER]
    rest = [r for r in body["resources"] if r["resource_type"] != BROKER_LOGGER]
    names = [r["resource_name"] for r in local]
    answers = {}
    for r in local:
        if names.count(r["resource_name"]) > 1:  # Kafka: refused, every time it is named
            answers[id(r)] = {"error_code": int(ErrorCode.INVALID_REQUEST), "resource_type": BROKER_LOGGER,
                              "error_message": "Each resource must appear at most once.",
                              "resource_name": r["resource_name"]}
        else:
            answers[id(r)] = alter(node_id, r, body["validate_only"])
    response = {"throttle_time_ms": 0, "responses": []}
    if rest:
        response = await others({**body, "resources": rest})
        for r, answer in zip(rest, response.get("responses") or ()):
            answers[id(r)] = answer
    return {**response, "responses": [answers.get(id(r)) or {
        "error_code": int(ErrorCode.UNKNOWN_SERVER_ERROR), "error_message": None,
        "resource_type": r["resource_type"], "resource_name": r["resource_name"]} for r in body["resources"]]}
