"""JVM options for the Spark processes the tests start.

A test's JVM lives for seconds to a minute, most of it warming up: the C2 compiler's threads
then compete with the JVM's own work and with the other tests' processes on a small CI machine,
for code that rarely runs long enough to profit from them. C1 alone and the serial collector
keep the tests' CPU for the tests. Drivers also map the venv's archive of Spark's classes
(tests/support/class_archive.py) rather than load them again. Benchmarks and the product keep
the JVM's defaults: a tiering job runs for days.

A JVM the tests kill leaves its temporary files behind (the native libraries it unpacks, Spark's
scratch directories): scripts/test.sh names a directory for them (:data:`TMPDIR_VARIABLE`) that
goes when the run ends.
"""

import os

from tests.support.class_archive import archive_options

#: the environment variable naming the directory the tests' JVMs keep their temporary files in
#: (``java.io.tmpdir``); unset, they use the JVM's default
TMPDIR_VARIABLE = "TESTS_JVM_TMPDIR"

JVM_OPTIONS = " ".join(
    ["-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    + ([f"-Djava.io.tmpdir={os.environ[TMPDIR_VARIABLE]}"] if os.environ.get(TMPDIR_VARIABLE) else [])
)

#: the environment variable spark-submit adds to its driver JVM's command line (client mode)
SUBMIT_OPTS_VARIABLE = "SPARK_SUBMIT_OPTS"

#: the options of every driver a test starts in client mode, with this venv's class archive when
#: it has one
DRIVER_OPTIONS = f"{JVM_OPTIONS} {archive_options()}".strip()

#: the same options for every JVM of a standalone cluster: its daemons (the environment) and the
#: drivers and executors it launches (spark-defaults.conf). No class archive: the cluster's conf
#: directory is on their classpath, which the archive's must match.
DAEMON_ENV = {"SPARK_DAEMON_JAVA_OPTS": JVM_OPTIONS, SUBMIT_OPTS_VARIABLE: JVM_OPTIONS}
DEFAULTS_CONF = {"spark.driver.extraJavaOptions": JVM_OPTIONS, "spark.executor.extraJavaOptions": JVM_OPTIONS}
