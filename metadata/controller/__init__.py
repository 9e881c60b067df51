"""The QuorumController: cluster, replication, config and producer-id control, sans-IO."""

from metadata.controller.common import ApiError, ControllerConfig, ControllerResult, Txn
from metadata.controller.quorum_controller import HANDLERS, QuorumController

__all__ = ["ApiError", "ControllerConfig", "ControllerResult", "HANDLERS", "QuorumController", "Txn"]
