"""An S3 server whose identities refuse parts of the write protocol, as a real deployment's may.

``refusing_s3`` is a SeaweedFS server of its own (identities are server-wide: the shared
``s3_server``'s tests must not see them) with one identity per refusal, each an IAM policy
attached to a user: everything on the bucket allowed, then the named S3 actions denied.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from tests.support.waiting import wait_until
from tiering.objectstore.embedded_s3 import EmbeddedS3, find_weed
from tiering.objectstore.object_store import ObjectStore

#: identity name -> the S3 actions it is refused
REFUSALS = {
    "no-multipart": ["s3:UploadPart"],  # small PUTs land, a multipart upload's parts do not
    "no-put": ["s3:PutObject"],
}


@dataclass(frozen=True)
class RefusingS3:
    server: EmbeddedS3

    def root(self, prefix: str) -> str:
        return f"{self.server.root}/{prefix}"

    def storage_options(self, identity: str) -> dict[str, str]:
        return {
            **self.server.storage_options(),
            "AWS_ACCESS_KEY_ID": identity,
            "AWS_SECRET_ACCESS_KEY": f"{identity}-secret",
        }


def _lists(fs, bucket: str) -> bool:
    try:
        fs.get_file_info(pafs.FileSelector(bucket, allow_not_found=True))
    except OSError:
        return False
    return True


def _weed_shell(server: EmbeddedS3, commands: str) -> None:
    ports = server.ports
    done = subprocess.run(
        [
            find_weed(),
            "shell",
            f"-master=127.0.0.1:{ports['master.port']}.{ports['master.port.grpc']}",
            f"-filer=127.0.0.1:{ports['filer.port']}.{ports['filer.port.grpc']}",
        ],
        input=commands,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def refusing_s3(tmp_path_factory) -> Iterator[RefusingS3]:
    server = EmbeddedS3().start(tmp_path_factory.mktemp("s3-refusing"))
    directory: Path = server.data_dir
    commands = []
    for identity, denied in REFUSALS.items():
        policy = directory / f"{identity}.json"
        bucket = f"arn:aws:s3:::{server.bucket}"
        policy.write_text(
            json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {"Effect": "Allow", "Action": ["s3:*"], "Resource": [bucket, f"{bucket}/*"]},
                        {"Effect": "Deny", "Action": denied, "Resource": [f"{bucket}/*"]},
                    ],
                }
            )
        )
        commands += [
            f"s3.policy -put -name={identity} -file={policy}",
            f"s3.configure -user={identity} -actions=Read,Write,List -policies={identity} "
            f"-access_key={identity} -secret_key={identity}-secret -apply",
        ]
    _weed_shell(server, "\n".join(commands) + "\n")
    refusing = RefusingS3(server)
    for identity in REFUSALS:  # the S3 gateway learns new identities from the filer, shortly after
        fs = ObjectStore.of(refusing.root("probe"), refusing.storage_options(identity), env={}).filesystem
        wait_until(lambda: _lists(fs, server.bucket), f"identity {identity!r} to be known", timeout_s=30)
    yield refusing
    server.stop()
