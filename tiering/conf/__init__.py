"""Typed configuration (docs/DESIGN.md §8): TOML file, then ``TIERING_<SECTION>_<KEY>`` environment, then
CLI overrides; validated strictly, every problem reported at once as one ConfigError."""

from tiering.conf.loader import ENV_PREFIX, env_name, load_config
from tiering.conf.model import (
    JobConfig,
    KvStoreConfig,
    LakeConfig,
    LeaseConfig,
    LimitsConfig,
    MaintenanceConfig,
    TablesConfig,
    TieringConfig,
    TriggerConfig,
    ZooKeeperConfig,
)
from tiering.conf.reference import config_reference_markdown

__all__ = [
    "load_config",
    "env_name",
    "ENV_PREFIX",
    "config_reference_markdown",
    "TieringConfig",
    "JobConfig",
    "KvStoreConfig",
    "ZooKeeperConfig",
    "LakeConfig",
    "TablesConfig",
    "TriggerConfig",
    "LeaseConfig",
    "LimitsConfig",
    "MaintenanceConfig",
]
