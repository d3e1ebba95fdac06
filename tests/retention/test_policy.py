"""The retention settings: defaults, good values, and each bad one named by check E090."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest

from tulip_memory.checks.retention import check_retention_settings
from tulip_memory.exceptions import ConfigurationError
from tulip_memory.retention.policy import (
    SWEEP_NAMES,
    RetentionPolicy,
    retention_policy,
    sweep_intervals,
)
from tulip_memory.retention.sweeps import SWEEPS


def test_by_default_nothing_is_removed(settings):
    settings.TULIP_MEMORY = {}
    assert retention_policy() == RetentionPolicy()
    assert sweep_intervals() == {
        "extraction_queues": 60,
        "expired_items": 300,
        "extraction_jobs": 3600,
        "checkpoints": 3600,
    }
    assert check_retention_settings() == []
    assert tuple(sweep.key for sweep in SWEEPS) == SWEEP_NAMES


def test_configured_values(settings):
    settings.TULIP_MEMORY = {
        "JOB_PAYLOAD_PURGE_AFTER_HOURS": 0,
        "JOB_DELETE_AFTER_DAYS": 30,
        "CHECKPOINT_KEEP_LAST": 20,
        "CHECKPOINT_IDLE_DAYS": 0.5,
        "SWEEP_INTERVALS": {"checkpoints": 86400},
    }
    assert retention_policy() == RetentionPolicy(
        job_payload_purge_after=timedelta(0),
        job_delete_after=timedelta(days=30),
        checkpoint_keep_last=20,
        checkpoint_idle=timedelta(hours=12),
    )
    assert sweep_intervals()["checkpoints"] == 86400
    assert sweep_intervals()["expired_items"] == 300
    assert check_retention_settings() == []


@pytest.mark.parametrize(
    ("setting", "value", "message"),
    [
        ("JOB_PAYLOAD_PURGE_AFTER_HOURS", -1, r"'JOB_PAYLOAD_PURGE_AFTER_HOURS'.*>= 0, got -1"),
        ("JOB_PAYLOAD_PURGE_AFTER_HOURS", "24", r"got '24'"),
        ("JOB_DELETE_AFTER_DAYS", math.nan, r"'JOB_DELETE_AFTER_DAYS'.*got nan"),
        ("JOB_DELETE_AFTER_DAYS", True, r"got True"),
        ("JOB_DELETE_AFTER_DAYS", math.inf, r"got inf \(at most 36525 days"),
        ("JOB_PAYLOAD_PURGE_AFTER_HOURS", 1e9, r"got 1000000000.0 \(at most 876600 hours"),
        ("CHECKPOINT_IDLE_DAYS", 36526, r"'CHECKPOINT_IDLE_DAYS'.*got 36526"),
        ("CHECKPOINT_IDLE_DAYS", 0, r"'CHECKPOINT_IDLE_DAYS'.*> 0, got 0"),
        ("CHECKPOINT_KEEP_LAST", 0, r"'CHECKPOINT_KEEP_LAST'.*int >= 1, got 0"),
        ("CHECKPOINT_KEEP_LAST", 2.5, r"got 2.5"),
        ("SWEEP_INTERVALS", [60], r"'SWEEP_INTERVALS'\] must be a dict"),
        ("SWEEP_INTERVALS", {"nope": 60}, r"unknown sweeps \['nope'\]"),
        ("SWEEP_INTERVALS", {"checkpoints": 0.5}, r"\['checkpoints'\] must be a whole number"),
    ],
)
def test_a_bad_setting_is_named(settings, setting, value, message):
    settings.TULIP_MEMORY = {setting: value}
    reader = sweep_intervals if setting == "SWEEP_INTERVALS" else retention_policy
    with pytest.raises(ConfigurationError, match=message):
        reader()
    [error] = check_retention_settings()
    assert error.id == "tulip_memory.E090" and setting in error.msg
