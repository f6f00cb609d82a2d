"""Java class files read as far as a class-clash check needs: a class's name, its supertypes, the
members it declares and the members of other classes it calls (the constant pool's field and
method references), and the classes of a set of jars, read lazily by name.

Why in Python: the check runs on every supported Spark's jars (thousands of classes) without a
JVM, and a class file's layout (JVM specification, chapter 4) is small and stable.
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

#: constant pool tags: Utf8, Class, and the field/method/interface-method references
_UTF8, _CLASS, _REFERENCES = 1, 7, (9, 10, 11)
#: the size after the tag of every other constant (Long and Double take two slots)
_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 8: 2, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
_TWO_SLOTS = (5, 6)

#: a member as the JVM names it: (name, descriptor), e.g. ("open", "(Ljava/lang/String;)Lorg/rocksdb/RocksDB;")
Member = tuple[str, str]


@dataclass(frozen=True)
class ClassFile:
    name: str  # internal form: org/rocksdb/RocksDB
    super_name: str | None
    interfaces: tuple[str, ...]
    members: frozenset[Member]
    #: (owner class, member) of every field and method this class refers to
    references: frozenset[tuple[str, Member]]


def read_class(data: bytes) -> ClassFile:
    count = struct.unpack_from(">H", data, 8)[0]
    pool: list[tuple[int, object] | None] = [None] * count
    index, pos = 1, 10
    while index < count:
        tag = data[pos]
        if tag == _UTF8:
            length = struct.unpack_from(">H", data, pos + 1)[0]
            pool[index] = (tag, data[pos + 3 : pos + 3 + length].decode("utf-8", "surrogateescape"))
            pos += 3 + length
        elif tag == _CLASS:
            pool[index] = (tag, struct.unpack_from(">H", data, pos + 1)[0])
            pos += 3
        elif tag in _REFERENCES or tag == 12:  # 12: NameAndType
            pool[index] = (tag, struct.unpack_from(">HH", data, pos + 1))
            pos += 5
        else:
            pos += 1 + _SIZES[tag]
        index += 2 if tag in _TWO_SLOTS else 1

    def utf8(i: int) -> str:
        return pool[i][1]  # type: ignore[index,return-value]

    def class_name(i: int) -> str:
        return utf8(pool[i][1])  # type: ignore[index,arg-type]

    _, this, super_index, interface_count = struct.unpack_from(">HHHH", data, pos)
    pos += 8
    interfaces = tuple(class_name(struct.unpack_from(">H", data, pos + 2 * i)[0]) for i in range(interface_count))
    pos += 2 * interface_count
    members = set()
    for _ in ("fields", "methods"):
        (member_count,) = struct.unpack_from(">H", data, pos)
        pos += 2
        for _ in range(member_count):
            _, name, descriptor, attribute_count = struct.unpack_from(">HHHH", data, pos)
            pos += 8
            members.add((utf8(name), utf8(descriptor)))
            for _ in range(attribute_count):
                pos += 6 + struct.unpack_from(">I", data, pos + 2)[0]
    references = set()
    for entry in pool:
        if entry is not None and entry[0] in _REFERENCES:
            owner, name_and_type = entry[1]  # type: ignore[misc]
            name, descriptor = pool[name_and_type][1]  # type: ignore[index,misc]
            references.add((class_name(owner), (utf8(name), utf8(descriptor))))
    return ClassFile(
        class_name(this),
        class_name(super_index) if super_index else None,
        interfaces,
        frozenset(members),
        frozenset(references),
    )


class JarClasses:
    """The classes of ``jars`` by internal name, the first jar holding a name winning (a class
    path's order); each class read when first asked for, the jars open until :meth:`close`."""

    def __init__(self, jars: Iterable[Path]) -> None:
        self.archives = [zipfile.ZipFile(jar) for jar in jars]
        self.archive_of: dict[str, zipfile.ZipFile] = {}
        for archive in self.archives:
            for entry in archive.namelist():
                if entry.endswith(".class") and not entry.startswith("META-INF/") and "module-info" not in entry:
                    self.archive_of.setdefault(entry.removesuffix(".class"), archive)
        self.read = cache(self._read)

    def __enter__(self) -> JarClasses:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        for archive in self.archives:
            archive.close()

    def jar(self, name: str) -> str:
        """The file name of the jar class ``name`` comes from."""
        return Path(self.archive_of[name].filename or "").name

    def _read(self, name: str) -> ClassFile:
        return read_class(self.archive_of[name].read(name + ".class"))

    def declares(self, name: str, member: Member) -> bool:
        """Whether class ``name`` or one of its supertypes among these jars declares ``member``
        (a supertype outside them, the JDK's, counts as not declaring it: the check is strict)."""
        if name not in self.archive_of:
            return False
        found = self.read(name)
        if member in found.members:
            return True
        return any(self.declares(parent, member) for parent in (found.super_name, *found.interfaces) if parent)
