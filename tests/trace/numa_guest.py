"""A 2-node NUMA guest under qemu-system-x86_64 (software emulation, TCG) that runs
OpenMP programs under the real OMPT tool and sends the tool's files back over the serial console.

The guest is the host's Debian kernel with a busybox initramfs holding the programs, the tool, LLVM's libomp
(as libgomp.so.1 too) and their libraries at the host's paths (so addr2line on the host resolves the code
addresses). Node 0 holds CPU 0, node 1 CPU 1, 256 MiB each. Used by the slow test of the live placement.
"""

from __future__ import annotations

import glob
import gzip
import shutil
import subprocess
from pathlib import Path

QEMU = shutil.which("qemu-system-x86_64")
BUSYBOX = shutil.which("busybox")
KERNELS = sorted(glob.glob("/boot/vmlinuz-*"))
BEGIN, END = "@@TS-BEGIN ", "@@TS-END"


def available() -> str | None:
    """None when a guest can be booted here, else what is missing."""
    if not QEMU:
        return "qemu-system-x86_64 not installed (Debian qemu-system-x86)"
    if not KERNELS:
        return "no kernel in /boot (Debian linux-image-amd64)"
    if not BUSYBOX:
        return "busybox not installed (Debian busybox-static)"
    return None


def _libraries(paths: list[Path]) -> set[Path]:
    libs: set[Path] = set()
    for p in paths:
        out = subprocess.run(["ldd", str(p)], capture_output=True, text=True, check=False).stdout
        for line in out.splitlines():
            parts = line.split()
            for part in parts:
                if part.startswith("/") and Path(part).exists():
                    libs.add(Path(part))
    return libs


def _cpio(root: Path, out: Path) -> None:
    files = subprocess.run(["find", "."], cwd=root, capture_output=True, text=True, check=True).stdout
    data = subprocess.run(
        ["cpio", "-o", "-H", "newc", "--quiet"],
        cwd=root,
        input=files.encode(),
        capture_output=True,
        check=True,
    ).stdout
    out.write_bytes(gzip.compress(data, compresslevel=1))


def build_initramfs(work: Path, programs: list[Path], tool: Path, libomp: Path, script: str) -> Path:
    """An initramfs running `script` (sh) after mounting proc, sys and a tmpfs on /out."""
    root = work / "root"
    for d in ("bin", "proc", "sys", "dev", "out", "tmp", "gomp"):
        (root / d).mkdir(parents=True, exist_ok=True)
    shutil.copy2(BUSYBOX, root / "bin" / "busybox")
    for applet in ("sh", "mount", "cat", "ls", "mkdir", "poweroff", "echo", "find", "env"):
        (root / "bin" / applet).symlink_to("busybox")
    for path in [*programs, tool, libomp, *_libraries([*programs, tool, libomp])]:
        dest = root / path.relative_to("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path.resolve(), dest)
    (root / "gomp" / "libgomp.so.1").symlink_to(str(libomp))
    (root / "lib64").mkdir(exist_ok=True)
    if not (root / "lib64" / "ld-linux-x86-64.so.2").exists():
        shutil.copy2("/lib64/ld-linux-x86-64.so.2", root / "lib64" / "ld-linux-x86-64.so.2")
    init = root / "init"
    init.write_text(
        "#!/bin/sh\n"
        "mount -t proc proc /proc\nmount -t sysfs sys /sys\nmount -t devtmpfs dev /dev\n"
        "mount -t tmpfs out /out\nmkdir -p /dev/shm\nmount -t tmpfs shm /dev/shm\n"
        f"{script}\n"
        "poweroff -f\n"
    )
    init.chmod(0o755)
    image = work / "initramfs.gz"
    _cpio(root, image)
    return image


def dump_dir(directory: str, tag: str) -> str:
    """Shell that prints every file under `directory` between markers, for `collect`."""
    return f'for f in $(find {directory} -type f); do echo "{BEGIN}{tag}:$f"; cat $f; echo "{END}"; done\n'


def boot(image: Path, timeout: float = 900) -> str:
    """Boot the guest with two NUMA nodes; its console output."""
    argv = [
        QEMU,
        "-kernel",
        KERNELS[-1],
        "-initrd",
        str(image),
        "-nographic",
        "-no-reboot",
        "-append",
        "console=ttyS0 panic=-1 loglevel=3",
        "-m",
        "512",
        "-smp",
        "2,sockets=2,cores=1,threads=1",
        "-object",
        "memory-backend-ram,id=m0,size=256M",
        "-object",
        "memory-backend-ram,id=m1,size=256M",
        "-numa",
        "node,nodeid=0,cpus=0,memdev=m0",
        "-numa",
        "node,nodeid=1,cpus=1,memdev=m1",
    ]
    # software emulation: nested KVM in this CI guest hangs after the BIOS (seen 2026-11); TCG boots in ~12 s
    argv += ["-cpu", "max"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    return proc.stdout


def collect(console: str, dest: Path) -> dict[str, Path]:
    """Write the files printed by `dump_dir` under dest/<tag>/...; tag -> its directory."""
    tags: dict[str, Path] = {}
    current: list[str] | None = None
    target: Path | None = None
    for line in console.replace("\r", "").splitlines():
        if line.startswith(BEGIN):
            tag, _, path = line[len(BEGIN) :].partition(":")
            target = dest / tag / path.lstrip("/")
            tags[tag] = dest / tag
            current = []
        elif line == END and current is not None and target is not None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("\n".join(current) + ("\n" if current else ""))
            current, target = None, None
        elif current is not None:
            current.append(line)
    return tags
