"""Safety of tritonhttp.utils.shared_memory: no segfault, no leak, no resource tracker.

Crash-prone scenarios run in a child interpreter, so a segfault shows up as a failing
return code instead of killing the test run.
"""

from __future__ import annotations

import os
import signal
import sys

import numpy as np
import pytest
from shm_helpers import DEV_SHM, KeyFactory, region, run_python

from tritonhttp.utils import shared_memory as shm


def fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def mappings_of(key: str) -> list[str]:
    with open("/proc/self/maps") as maps:
        return [line for line in maps if f"/dev/shm{key}" in line]


pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="uses /proc and /dev/shm")


def test_reading_after_destroy_raises_or_reads_never_segfaults(key_factory: KeyFactory) -> None:
    result = run_python(
        """
        import sys
        import numpy as np
        from tritonhttp.utils import shared_memory as shm
        h = shm.create_shared_memory_region("r", sys.argv[1], 1 << 20)
        shm.set_shared_memory_region(h, [np.arange(1 << 18, dtype=np.float32)])
        view = shm.get_contents_as_numpy(h, np.float32, [1 << 18])
        shm.destroy_shared_memory_region(h)
        print("view-sum", float(view.sum()))
        for attempt in (
            lambda: shm.get_contents_as_numpy(h, np.float32, [4]),
            lambda: shm.get_contents_as_numpy(h, np.object_, [1]),
            lambda: shm.set_shared_memory_region(h, [np.zeros(4)]),
            lambda: shm.destroy_shared_memory_region(h),
        ):
            try:
                attempt()
            except shm.SharedMemoryException as e:
                print("refused:", e)
            else:
                print("NOT REFUSED")
        del view
        print("done")
        """,
        key_factory(),
    )
    assert result.returncode == 0, (result.returncode, result.stderr)
    assert result.returncode != -signal.SIGSEGV
    lines = result.stdout.splitlines()
    assert lines[0] == f"view-sum {float(np.arange(1 << 18, dtype=np.float32).sum())}"
    assert sum("has been destroyed" in line for line in lines) == 4
    assert "NOT REFUSED" not in result.stdout
    assert lines[-1] == "done" and result.stderr == ""


def test_memory_is_unmapped_when_the_last_view_goes(key_factory: KeyFactory) -> None:
    key = key_factory()
    h = shm.create_shared_memory_region("r", key, 8192)
    view = shm.get_contents_as_numpy(h, np.uint8, [8192])
    assert len(mappings_of(key)) == 1
    shm.destroy_shared_memory_region(h)
    assert not (DEV_SHM / key[1:]).exists()
    assert len(mappings_of(key)) == 1, "still mapped for the live view"
    del view
    assert mappings_of(key) == []


def test_destroy_unmaps_at_once_without_views(key_factory: KeyFactory) -> None:
    key = key_factory()
    h = shm.create_shared_memory_region("r", key, 4096)
    shm.set_shared_memory_region(h, [np.ones(8)])
    assert shm.get_contents_as_numpy(h, np.float64, [8]).sum() == 8  # temporary view
    shm.destroy_shared_memory_region(h)
    assert mappings_of(key) == []


def test_repeated_create_destroy_leaks_nothing(key_factory: KeyFactory) -> None:
    keys = [key_factory() for _ in range(4)]
    fds, maps = fd_count(), sum(len(mappings_of(k)) for k in keys)

    def cycle(key: str) -> None:
        a = shm.create_shared_memory_region("a", key, 65536)
        b = shm.create_shared_memory_region("b", key, 65536)  # attach: refcount 2
        shm.set_shared_memory_region(a, [np.arange(100, dtype=np.int64)], offset=64)
        got = shm.get_contents_as_numpy(b, np.int64, [100], offset=64)
        assert int(got[99]) == 99
        del got
        shm.destroy_shared_memory_region(a)
        shm.destroy_shared_memory_region(b)

    for _ in range(150):
        for key in keys:
            cycle(key)
    assert fd_count() == fds
    assert sum(len(mappings_of(k)) for k in keys) == maps == 0
    assert not any((DEV_SHM / k[1:]).exists() for k in keys)
    assert shm.mapped_shared_memory_regions() == []


def test_failed_creates_leak_nothing(key_factory: KeyFactory) -> None:
    key = key_factory()
    fds = fd_count()
    with region("r", key, 16):
        for _ in range(50):
            with pytest.raises(shm.SharedMemoryException):
                shm.create_shared_memory_region("x", key, 16, create_only=True)
            with pytest.raises(shm.SharedMemoryException):
                shm.create_shared_memory_region("x", "/bad/key", 16)
            with pytest.raises(shm.SharedMemoryException):
                shm.create_shared_memory_region("x", key_factory(), 0)
        assert shm.mapped_shared_memory_regions() == [key]
    assert fd_count() == fds


def test_an_attaching_process_neither_unlinks_nor_warns(key_factory: KeyFactory) -> None:
    key = key_factory()
    with region("r", key, 64) as h:
        shm.set_shared_memory_region(h, [np.arange(8, dtype=np.int64)])
        for destroy in ("yes", "no"):
            result = run_python(
                """
                import sys
                import numpy as np
                from tritonhttp.utils import shared_memory as shm
                h = shm.create_shared_memory_region("child", sys.argv[1], 64)
                print(int(shm.get_contents_as_numpy(h, np.int64, [8]).sum()))
                if sys.argv[2] == "yes":
                    shm.destroy_shared_memory_region(h)
                """,
                key,
                destroy,
            )
            assert result.returncode == 0, result.stderr
            assert result.stdout.strip() == "28"
            assert result.stderr == "", "no resource_tracker warning"
            assert (DEV_SHM / key[1:]).exists(), "the child must not unlink our segment"
        assert shm.get_contents_as_numpy(h, np.int64, [8]).sum() == 28


def test_segments_created_and_not_destroyed_are_unlinked_at_exit(key_factory: KeyFactory) -> None:
    kept, destroyed = key_factory(), key_factory()
    result = run_python(
        """
        import sys
        from tritonhttp.utils import shared_memory as shm
        shm.create_shared_memory_region("kept", sys.argv[1], 64)
        h = shm.create_shared_memory_region("gone", sys.argv[2], 64)
        shm.destroy_shared_memory_region(h)
        print("ok")
        """,
        kept,
        destroyed,
    )
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr
    assert result.stderr == ""
    assert not (DEV_SHM / kept[1:]).exists()
    assert not (DEV_SHM / destroyed[1:]).exists()


def test_a_forked_child_leaves_the_parents_segment_alone(key_factory: KeyFactory) -> None:
    key = key_factory()
    result = run_python(
        """
        import os, sys
        import numpy as np
        from tritonhttp.utils import shared_memory as shm
        h = shm.create_shared_memory_region("r", sys.argv[1], 64)
        shm.set_shared_memory_region(h, [np.full(8, 3, dtype=np.int64)])
        pid = os.fork()
        if pid == 0:  # child: use and destroy the inherited handle, exit normally
            ok = int(shm.get_contents_as_numpy(h, np.int64, [8]).sum()) == 24
            shm.destroy_shared_memory_region(h)
            shm.create_shared_memory_region("again", sys.argv[1], 64)  # attach, not create
            sys.exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, status
        assert os.path.exists("/dev/shm/" + sys.argv[1][1:]), "child unlinked it"
        print(int(shm.get_contents_as_numpy(h, np.int64, [8]).sum()))
        shm.destroy_shared_memory_region(h)
        print(os.path.exists("/dev/shm/" + sys.argv[1][1:]))
        """,
        key,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["24", "False"]


def test_a_name_recreated_by_someone_else_is_not_unlinked(key_factory: KeyFactory) -> None:
    import _posixshmem  # type: ignore[import-not-found]

    key = key_factory()
    h = shm.create_shared_memory_region("r", key, 64)
    _posixshmem.shm_unlink(key)  # someone removes our name ...
    fd = _posixshmem.shm_open(key, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)  # ... reuses it
    try:
        shm.destroy_shared_memory_region(h)
        assert (DEV_SHM / key[1:]).exists(), "their object must survive our destroy"
    finally:
        os.close(fd)
        _posixshmem.shm_unlink(key)
