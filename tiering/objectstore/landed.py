"""Writing one object to the lake's store and knowing it landed, every byte of it.

Failure mode this exists for: pyarrow's S3 output stream uploads in the background and reports
a refused part only when the stream is closed — and a stream closed by its destructor (as
``pyarrow.fs.copy_files`` leaves it on some paths) only *logs* "Error ignored when destroying
file ... UploadPart" and returns. The object never exists, the caller gets no error, and the
Delta commit that references it fails later with a message naming neither the object nor the
cause (``failed to extract field PyAddAction.size``: the size of a missing file is None).

So every write goes through :class:`LandedObject`: the stream is closed explicitly (its error
raised), then one HEAD (``get_file_info``) must find the object with exactly the bytes written.
Anything else is an :class:`~tiering.errors.ObjectWriteError` naming the object, the request
that failed and the store's answer. Transient answers (503 SlowDown, 500, resets, timeouts)
were already retried inside the request by the client's retry strategy
(:mod:`tiering.objectstore.object_store`); what reaches here is what remained. No re-read: a HEAD
per written object is the whole cost, and it replaces the HEAD that read the file's size.
"""

from __future__ import annotations

import re
from types import TracebackType

import pyarrow as pa
import pyarrow.fs as pafs

from tiering.errors import ObjectWriteError, one_line

__all__ = ["LandedObject", "copy_object", "store_answer"]

#: pyarrow's S3 errors: "... AWS Error ACCESS_DENIED during UploadPart operation: Access Denied. (Request ID: ...)"
#: (a body-less answer, to a HEAD, is "AWS Error UNKNOWN (HTTP status 503) during HeadObject ...")
_AWS_ERROR = re.compile(
    r"AWS Error (?P<code>\w+)(?: \(HTTP status (?P<status>\d+)\))? during (?P<operation>\w+) "
    r"operation:?\s*(?P<detail>.*?)\s*(\(Request ID.*)?$"
)
_COPY_CHUNK = 8 * 1024 * 1024


def store_answer(error: BaseException, default_operation: str) -> tuple[str, str]:
    """``(operation, answer)`` of a failed object-store call: the S3 request and the store's
    error code and text when pyarrow names them, else ``default_operation`` and the error."""
    text = one_line(error)
    found = _AWS_ERROR.search(text)
    if found is None:
        return default_operation, f"{type(error).__name__}: {text[:300]}"
    code, detail = found["code"], found["detail"][:300]
    if "curlCode: 28" in detail:
        code = "TIMEOUT"
    elif code == "UNKNOWN" and found["status"]:
        code = f"HTTP {found['status']}"
    return found["operation"], f"{code} ({detail})"


class LandedObject:
    """``with LandedObject(fs, path, uri) as sink: ...`` writes ``path`` and, on a clean exit,
    closes the stream and checks the object is there with every byte; :attr:`size` is then its
    size. ``uri`` is how errors name the object. An error inside the block closes the stream
    quietly and propagates (a partial object may be left: unreferenced, VACUUM removes it)."""

    def __init__(self, fs: pafs.FileSystem, path: str, uri: str) -> None:
        self._fs = fs
        self._path = path
        self._uri = uri
        self._sink: pa.NativeFile | None = None
        self.size = -1

    def __enter__(self) -> pa.NativeFile:
        try:
            self._sink = self._fs.open_output_stream(self._path)
        except OSError as e:
            raise ObjectWriteError(self._uri, *store_answer(e, "open for writing")) from e
        return self._sink

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        assert self._sink is not None
        if error is not None:
            try:
                self._sink.close()
            except OSError:
                pass  # the block's own error is the one to report
            return
        written = self._sink.tell()
        try:
            self._sink.close()
        except OSError as e:
            raise ObjectWriteError(self._uri, *store_answer(e, "close (upload)")) from e
        self.size = self._check(written)

    def _check(self, written: int) -> int:
        try:
            info = self._fs.get_file_info(self._path)
        except OSError as e:
            raise ObjectWriteError(self._uri, *store_answer(e, "HeadObject")) from e
        if info.type != pafs.FileType.File:
            raise ObjectWriteError(
                self._uri, "HeadObject", f"no object after the upload reported success ({written} bytes written)"
            )
        if info.size != written:
            raise ObjectWriteError(self._uri, "HeadObject", f"the object has {info.size} bytes, {written} were written")
        return written


def copy_object(reader: pa.NativeFile, landed: LandedObject) -> int:
    """The rest of ``reader`` copied byte for byte into ``landed``; the landed object's size."""
    with landed as sink:
        while chunk := reader.read(_COPY_CHUNK):
            sink.write(chunk)
    return landed.size
