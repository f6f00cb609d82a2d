"""The job's Spark session (tiering.job.spark_session): the Spark settings the lake writer relies
on win over the config's ``[spark]`` section."""

from __future__ import annotations

import pytest

from tests.support.config import make_config
from tiering.job import REQUIRED_SPARK_CONF, build_spark

pytestmark = pytest.mark.integration


def test_the_spark_settings_the_writer_relies_on_win_over_the_config(spark, tmp_path):
    config = make_config(
        tmp_path,
        "http://127.0.0.1:1",
        "127.0.0.1:1",
        **{
            "spark.spark.sql.session.timeZone": "America/New_York",
            "spark.spark.kvtiering.test.marker": "set",
        },
    )
    assert config.spark["spark.sql.session.timeZone"] == "America/New_York"

    session = build_spark(config)

    assert session is spark, "an existing session is reused (spark-submit's or a test's)"
    for key, value in REQUIRED_SPARK_CONF.items():
        assert session.conf.get(key) == value
    assert session.conf.get("spark.kvtiering.test.marker") == "set", "the config's other settings are applied"
