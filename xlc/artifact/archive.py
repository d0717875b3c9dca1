"""Reading the zip of an `.xlc` file safely: every check that can be made from the zip's
directory and the manifest is made before a member is decompressed.

`read_archive(data, where)` checks, in this order: the zip opens; no member name repeats; the
manifest is present, declares at most `MAX_MANIFEST_BYTES` and parses, with a known format
version and the seal of the zip comment; every member the manifest lists is present and
nothing else is; the members every archive has are listed; each member's size in the zip
directory equals its size in the manifest; the declared sizes add up to at most `max_bytes`
(`MAX_ARCHIVE_BYTES` by default). Only then are the members decompressed, each streamed with a
cap of its declared size (a member that decompresses to more is refused), and their sha256
compared with the manifest's. So a zip bomb (a few MB that inflate to GBs) costs no more memory
than the limit: it is refused from its declared sizes, or when its data outgrows them.
Any failure is an `ArtifactError` naming the file and the member.
"""
from __future__ import annotations

import hashlib
import io
import os
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

from xlc.artifact.manifest import (
    ASSIGNMENT_MEMBER,
    HLO_MEMBER,
    MANIFEST_NAME,
    REPORT_MEMBER,
    Manifest,
    parse_manifest,
)
from xlc.errors import ArtifactError

MAX_MANIFEST_BYTES = 64 << 20
"""The largest `manifest.json` read (its declared uncompressed size)."""
MAX_ARCHIVE_BYTES = 2 << 30
"""The default limit on the total uncompressed size of an archive's members (2 GiB)."""
_CHUNK = 1 << 20

# Members every archive has, whatever the backend.
REQUIRED_MEMBERS = (HLO_MEMBER, REPORT_MEMBER, ASSIGNMENT_MEMBER)


@dataclass
class Archive:
    """A checked archive: the manifest and every member's bytes (checksums verified)."""

    manifest: Manifest
    members: dict[str, bytes]
    raw: bytes
    where: str


def read_member(z: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int, where: str) -> bytes:
    """The uncompressed bytes of member `info`, streamed: ArtifactError as soon as more than
    `limit` bytes come out (never allocating more than `limit` + one chunk), or when the zip
    data is damaged."""
    out = bytearray()
    try:
        with z.open(info) as f:
            while chunk := f.read(min(_CHUNK, limit + 1 - len(out))):
                out += chunk
                if len(out) > limit:
                    raise ArtifactError(f"{where}: member {info.filename} decompresses to more "
                                        f"than its declared {limit} bytes; the file is damaged "
                                        "or malicious, refusing to load it")
    # zipfile raises NotImplementedError for a member whose compression method it lacks (a
    # damaged header or a foreign writer): the file is refused like any other damage
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, NotImplementedError) as e:
        raise ArtifactError(f"{where}: the file is corrupted ({e})") from None
    return bytes(out)


def read_manifest_bytes(z: zipfile.ZipFile, where: str) -> bytes:
    """The raw `manifest.json` of an open archive, refused unread when it declares more than
    `MAX_MANIFEST_BYTES`."""
    try:
        info = z.getinfo(MANIFEST_NAME)
    except KeyError:
        raise ArtifactError(f"{where}: not an xlc executable (no {MANIFEST_NAME})") from None
    if info.file_size > MAX_MANIFEST_BYTES:
        raise ArtifactError(f"{where}: {MANIFEST_NAME} declares {info.file_size} bytes, over "
                            f"the {MAX_MANIFEST_BYTES}-byte limit; refusing to load it")
    return read_member(z, info, info.file_size, where)


def _check_directory(z: zipfile.ZipFile, manifest: Manifest, where: str,
                     max_bytes: int) -> dict[str, zipfile.ZipInfo]:
    """The zip directory entries of the manifest's members, after the checks that need no
    decompression: names (missing, unlisted, required), sizes (zip vs manifest, the total)."""
    infos = {i.filename: i for i in z.infolist() if i.filename != MANIFEST_NAME}
    listed = set(manifest.members)
    missing = sorted(listed - set(infos))
    if missing:
        raise ArtifactError(f"{where}: member(s) {', '.join(missing)} missing; the file is "
                            "incomplete")
    extra = sorted(set(infos) - listed)
    if extra:
        raise ArtifactError(f"{where}: unlisted member(s) {', '.join(extra)}; the file was "
                            "tampered with")
    absent = [n for n in REQUIRED_MEMBERS if n not in infos]
    if absent:
        raise ArtifactError(f"{where}: not a complete xlc executable (no {', '.join(absent)})")
    for name, info in infos.items():
        declared = manifest.members[name].size
        if info.file_size != declared:
            raise ArtifactError(f"{where}: member {name} is {info.file_size} bytes "
                                f"uncompressed in the zip but {declared} in the manifest; the "
                                "file was modified or damaged, refusing to load it")
    total = sum(m.size for m in manifest.members.values())
    if total > max_bytes:
        biggest = max(manifest.members, key=lambda n: manifest.members[n].size)
        raise ArtifactError(f"{where}: the members declare {total} bytes uncompressed "
                            f"({biggest}: {manifest.members[biggest].size}), over the limit "
                            f"of {max_bytes} bytes; refusing to decompress it (a file you "
                            "trust can be loaded with a larger max_bytes)")
    return infos


def read_archive(data: bytes, where: str, max_bytes: int = MAX_ARCHIVE_BYTES) -> Archive:
    """Open and check archive bytes (see the module docstring for the checks and their
    order); `max_bytes` caps the total uncompressed size of the members. Raises ArtifactError
    naming `where` on any problem."""
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError, EOFError):
        raise ArtifactError(f"{where}: not a valid .xlc file (not a zip archive, or "
                            "truncated)") from None
    with z:
        names = z.namelist()
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ArtifactError(f"{where}: member(s) {', '.join(dup)} appear more than once; "
                                "the file was tampered with")
        manifest = parse_manifest(read_manifest_bytes(z, where), where, z.comment)
        infos = _check_directory(z, manifest, where, max_bytes)
        members = {name: read_member(z, info, info.file_size, where)
                   for name, info in infos.items()}
    for name, info in manifest.members.items():
        if hashlib.sha256(members[name]).hexdigest() != info.sha256:
            raise ArtifactError(f"{where}: checksum mismatch for {name}; the file was "
                                "modified or damaged, refusing to load it")
    return Archive(manifest, members, data, where)


def file_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of an `.xlc` file; ArtifactError for a missing file or a directory."""
    p = Path(path)
    if not p.exists():
        raise ArtifactError(f"{path}: no such file")
    if p.is_dir():
        raise ArtifactError(f"{path}: is a directory, expected an .xlc file")
    return p.read_bytes()


def read_archive_file(path: str | os.PathLike[str],
                      max_bytes: int = MAX_ARCHIVE_BYTES) -> Archive:
    """Open and check the `.xlc` file at `path` (see `read_archive`); no code is loaded."""
    return read_archive(file_bytes(path), str(path), max_bytes)


__all__ = ["MAX_ARCHIVE_BYTES", "MAX_MANIFEST_BYTES", "REQUIRED_MEMBERS", "Archive",
           "file_bytes", "read_archive", "read_archive_file", "read_manifest_bytes",
           "read_member"]
