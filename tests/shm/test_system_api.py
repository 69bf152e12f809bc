"""tritonhttp.utils.shared_memory: the tritonclient API and semantics, and its errors."""

from __future__ import annotations

import _posixshmem  # type: ignore[import-not-found]
import inspect
import os
import pickle
import warnings

import numpy as np
import pytest
import tritonclient.utils.shared_memory as tc_shm
from _dtypes import NUMERIC
from shm_helpers import DEV_SHM, KeyFactory, region, tc_attach, tc_detach

from tritonhttp.utils import serialize_byte_tensor
from tritonhttp.utils import shared_memory as shm


def sample(dtype: object, shape: tuple[int, ...] = (3, 5)) -> np.ndarray:
    values = np.arange(int(np.prod(shape))).reshape(shape) % 7
    return values.astype(dtype)


def exists(key: str) -> bool:
    return (DEV_SHM / key.lstrip("/")).exists()


# --- names and signatures ---------------------------------------------------------------


def test_public_names_match_tritonclient() -> None:
    expected = {
        "SharedMemoryRegion",
        "SharedMemoryException",
        "create_shared_memory_region",
        "set_shared_memory_region",
        "get_contents_as_numpy",
        "mapped_shared_memory_regions",
        "destroy_shared_memory_region",
    }
    assert set(shm.__all__) == expected
    for name in expected:
        assert hasattr(tc_shm, name)


@pytest.mark.parametrize(
    "name",
    [
        "create_shared_memory_region",
        "set_shared_memory_region",
        "get_contents_as_numpy",
        "mapped_shared_memory_regions",
        "destroy_shared_memory_region",
    ],
)
def test_signatures_match_tritonclient(name: str) -> None:
    ours = list(inspect.signature(getattr(shm, name)).parameters.values())
    theirs = list(inspect.signature(getattr(tc_shm, name)).parameters.values())
    assert [(p.name, p.default) for p in ours] == [(p.name, p.default) for p in theirs]


def test_exception_is_a_plain_exception_that_pickles() -> None:
    e = shm.SharedMemoryException("boom")
    assert isinstance(e, Exception) and str(e) == "boom"
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is shm.SharedMemoryException and str(again) == "boom"


# --- create / attach / reference counts --------------------------------------------------


@pytest.mark.parametrize("dtype", NUMERIC, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_numeric_dtype(key_factory: KeyFactory, dtype: object) -> None:
    value = sample(dtype)
    with region("r", key_factory(), value.nbytes) as h:
        shm.set_shared_memory_region(h, [value])
        got = shm.get_contents_as_numpy(h, dtype, value.shape)
        assert got.dtype == np.dtype(dtype) and got.shape == value.shape
        assert np.array_equal(got, value)


def test_creating_makes_a_dev_shm_object_and_destroy_unlinks_it(key_factory: KeyFactory) -> None:
    key = key_factory()
    h = shm.create_shared_memory_region("r", key, 4096)
    assert exists(key)
    assert (DEV_SHM / key[1:]).stat().st_size == 4096
    assert (DEV_SHM / key[1:]).stat().st_mode & 0o777 == 0o600
    assert h.byte_size == 4096 and h.triton_shm_name == "r" and h.shm_key == key
    assert shm.mapped_shared_memory_regions() == [key]
    shm.destroy_shared_memory_region(h)
    assert not exists(key)
    assert shm.mapped_shared_memory_regions() == []
    assert h.destroyed


def test_get_returns_a_zero_copy_writable_view(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 64) as h:
        a = shm.get_contents_as_numpy(h, np.int32, [16])
        b = shm.get_contents_as_numpy(h, np.int32, [4, 4])
        assert a.flags.writeable and np.shares_memory(a, b)
        a[5] = 1234
        assert b[1, 1] == 1234
        del a, b


def test_second_create_attaches_and_reference_counts(key_factory: KeyFactory) -> None:
    key = key_factory()
    first = shm.create_shared_memory_region("a", key, 64)
    second = shm.create_shared_memory_region("b", key, 64)
    assert shm.mapped_shared_memory_regions() == [key]
    shm.set_shared_memory_region(first, [np.arange(16, dtype=np.float32)])
    assert np.array_equal(
        shm.get_contents_as_numpy(second, np.float32, [16]), np.arange(16, dtype=np.float32)
    )
    shm.destroy_shared_memory_region(first)
    assert exists(key), "the object must live while another handle uses it"
    assert shm.mapped_shared_memory_regions() == [key]
    assert shm.get_contents_as_numpy(second, np.float32, [16])[3] == 3
    shm.destroy_shared_memory_region(second)
    assert not exists(key)
    assert shm.mapped_shared_memory_regions() == []


def test_key_without_leading_slash_names_the_same_object(key_factory: KeyFactory) -> None:
    key = key_factory()
    with region("a", key, 16) as h1, region("b", key[1:], 16) as h2:
        shm.set_shared_memory_region(h1, [np.array([7, 8, 9, 10], dtype=np.int32)])
        assert list(shm.get_contents_as_numpy(h2, np.int32, [4])) == [7, 8, 9, 10]
        assert shm.mapped_shared_memory_regions() == [key]
    assert not exists(key)


def test_attaching_to_a_foreign_object_never_unlinks_it(key_factory: KeyFactory) -> None:
    key = key_factory()
    fd = _posixshmem.shm_open(key, os.O_CREAT | os.O_EXCL | os.O_RDWR, mode=0o600)
    try:
        os.ftruncate(fd, 32)
        os.pwrite(fd, b"\x01\x00\x00\x00", 0)
        with region("r", key, 32) as h:
            assert shm.get_contents_as_numpy(h, np.int32, [1])[0] == 1
        assert exists(key), "we did not create it, so we must not unlink it"
    finally:
        os.close(fd)
        _posixshmem.shm_unlink(key)


def test_create_only_refuses_an_existing_key(key_factory: KeyFactory) -> None:
    key = key_factory()
    with region("r", key, 16, create_only=True) as h:
        with pytest.raises(
            shm.SharedMemoryException, match="unable to create the shared memory region"
        ):
            shm.create_shared_memory_region("again", key, 16, create_only=True)
        assert shm.mapped_shared_memory_regions() == [key]
        assert h.byte_size == 16


def test_larger_request_on_existing_key_warns_like_tritonclient(key_factory: KeyFactory) -> None:
    key = key_factory()
    with region("r", key, 64):
        with pytest.warns(UserWarning) as ours:
            h2 = shm.create_shared_memory_region("r2", key, 128)
        assert h2.byte_size == 64
        shm.destroy_shared_memory_region(h2)
        with pytest.warns(UserWarning) as theirs:
            tc = tc_attach("r3", key, 128)
        tc_detach(tc)
        assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
        assert str(ours[0].message) == (
            f"reusing shared memory region with key '{key}', region size is 64 instead of "
            "requested 128"
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            h3 = shm.create_shared_memory_region("r4", key, 8)  # smaller: no warning
        assert h3.byte_size == 64
        shm.destroy_shared_memory_region(h3)


@pytest.mark.parametrize("byte_size", [0, -1])
def test_create_refuses_non_positive_sizes(key_factory: KeyFactory, byte_size: int) -> None:
    key = key_factory()
    with pytest.raises(shm.SharedMemoryException, match=r"unable to create|must not be negative"):
        shm.create_shared_memory_region("r", key, byte_size)
    assert not exists(key)


def test_create_refuses_non_integer_sizes(key_factory: KeyFactory) -> None:
    with pytest.raises(shm.SharedMemoryException, match="byte_size must be an integer"):
        shm.create_shared_memory_region("r", key_factory(), 1.5)  # type: ignore[arg-type]


def test_attaching_with_size_zero_uses_the_object_size(key_factory: KeyFactory) -> None:
    key = key_factory()
    with region("r", key, 48), region("r2", key, 0) as h:
        assert h.byte_size == 48


def test_repr_names_the_region(key_factory: KeyFactory) -> None:
    key = key_factory()
    with region("my_region", key, 16) as h:
        assert "my_region" in repr(h) and key in repr(h)
    assert "destroyed" in repr(h)


# --- key validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "/",
        "//x",
        "/a/b",
        "../etc/passwd",
        "/../etc/passwd",
        "/.",
        "/..",
        "..",
        "a\x00b",
        "/" + "x" * 256,
    ],
)
def test_keys_that_are_not_plain_names_are_refused(bad: str) -> None:
    before = set(os.listdir(DEV_SHM))
    with pytest.raises(shm.SharedMemoryException, match="invalid shared memory key"):
        shm.create_shared_memory_region("r", bad, 16)
    assert set(os.listdir(DEV_SHM)) == before
    assert shm.mapped_shared_memory_regions() == []


@pytest.mark.parametrize("bad", [None, 12, b"/bytes"])
def test_keys_must_be_strings(bad: object) -> None:
    with pytest.raises(shm.SharedMemoryException, match="shm_key must be a str"):
        shm.create_shared_memory_region("r", bad, 16)  # type: ignore[arg-type]


def test_a_name_of_255_bytes_is_fine(key_factory: KeyFactory) -> None:
    key = key_factory()
    long_key = key + "x" * (255 - len(key) + 1)
    with region("r", long_key, 16) as h:
        assert h.byte_size == 16


def test_a_directory_in_dev_shm_is_not_a_memory_object(key_factory: KeyFactory) -> None:
    key = key_factory()
    path = DEV_SHM / key[1:]
    path.mkdir()
    try:
        with pytest.raises(shm.SharedMemoryException):
            shm.create_shared_memory_region("r", key, 16)
        assert path.is_dir()
    finally:
        path.rmdir()


def test_a_symlink_in_dev_shm_is_not_followed(key_factory: KeyFactory, tmp_path) -> None:
    key = key_factory()
    target = tmp_path / "victim"
    target.write_bytes(b"precious")
    link = DEV_SHM / key[1:]
    link.symlink_to(target)
    try:
        with pytest.raises(shm.SharedMemoryException):
            shm.create_shared_memory_region("r", key, 16)
        assert target.read_bytes() == b"precious"
    finally:
        link.unlink()


# --- set ---------------------------------------------------------------------------------


def test_set_writes_back_to_back_from_the_offset(key_factory: KeyFactory) -> None:
    a = np.arange(4, dtype=np.int32)
    b = np.arange(3, dtype=np.float64) + 0.5
    with region("r", key_factory(), 64) as h:
        shm.set_shared_memory_region(h, [a, b], offset=8)
        raw = shm.get_contents_as_numpy(h, np.uint8, [64]).copy()
        assert raw[:8].tolist() == [0] * 8
        assert raw[8:24].tobytes() == a.tobytes()
        assert raw[24:48].tobytes() == b.tobytes()
        assert np.array_equal(shm.get_contents_as_numpy(h, np.float64, [3], offset=24), b)


def test_set_accepts_non_contiguous_arrays(key_factory: KeyFactory) -> None:
    base = np.arange(12, dtype=np.int16).reshape(3, 4)
    value = base.T[::2]  # neither C- nor F-contiguous
    with region("r", key_factory(), value.nbytes) as h:
        shm.set_shared_memory_region(h, (value,))
        assert np.array_equal(shm.get_contents_as_numpy(h, np.int16, value.shape), value)


def test_set_input_validation_messages_match_tritonclient(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 16) as h:
        with pytest.raises(
            shm.SharedMemoryException,
            match=r"^input_values must be specified as a list/tuple of numpy arrays$",
        ):
            shm.set_shared_memory_region(h, np.zeros(2))  # type: ignore[arg-type]
        with pytest.raises(
            shm.SharedMemoryException, match=r"^each element of input_values must be a numpy array$"
        ):
            shm.set_shared_memory_region(h, [b"abc"])  # type: ignore[list-item]


def test_set_that_does_not_fit_writes_nothing(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 16) as h:
        shm.set_shared_memory_region(h, [np.full(4, 9, dtype=np.int32)])
        with pytest.raises(shm.SharedMemoryException, match="do not fit"):
            shm.set_shared_memory_region(
                h, [np.zeros(2, dtype=np.int32), np.zeros(3, dtype=np.int32)]
            )
        with pytest.raises(shm.SharedMemoryException, match="do not fit"):
            shm.set_shared_memory_region(h, [np.zeros(1, dtype=np.int32)], offset=13)
        with pytest.raises(shm.SharedMemoryException, match="do not fit"):
            shm.set_shared_memory_region(h, [np.zeros(0, dtype=np.int32)], offset=17)
        assert shm.get_contents_as_numpy(h, np.int32, [4]).tolist() == [9, 9, 9, 9]


@pytest.mark.parametrize("offset", [-1, 1.0, "0", None])
def test_set_refuses_bad_offsets(key_factory: KeyFactory, offset: object) -> None:
    with (
        region("r", key_factory(), 16) as h,
        pytest.raises(shm.SharedMemoryException, match="offset"),
    ):
        shm.set_shared_memory_region(h, [np.zeros(1)], offset=offset)  # type: ignore[arg-type]


def test_set_exactly_to_the_end_and_empty_arrays(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 16) as h:
        shm.set_shared_memory_region(h, [np.zeros(0, np.float32), np.ones(2, np.float64)], 0)
        shm.set_shared_memory_region(h, [np.zeros(0, np.float32)], offset=16)
        assert shm.get_contents_as_numpy(h, np.float64, [2]).tolist() == [1.0, 1.0]


# --- BYTES -------------------------------------------------------------------------------


def test_bytes_round_trip_from_serialize_byte_tensor(key_factory: KeyFactory) -> None:
    value = np.array([[b"a", b""], [b"hello", "w\xf6rld".encode()]], dtype=object)
    framed = serialize_byte_tensor(value)
    prefix = np.arange(3, dtype=np.uint8)
    with region("r", key_factory(), 128) as h:
        shm.set_shared_memory_region(h, [prefix, framed])
        for dtype in (np.object_, np.bytes_):
            got = shm.get_contents_as_numpy(h, dtype, [2, 2], offset=3)
            assert got.dtype == object and got.shape == (2, 2)
            assert got.tolist() == value.tolist()


def test_unserialized_object_arrays_are_serialized_for_you(key_factory: KeyFactory) -> None:
    value = np.array(["x", "yz", 3], dtype=object)
    with region("r", key_factory(), 64) as h:
        shm.set_shared_memory_region(h, [value])
        assert shm.get_contents_as_numpy(h, np.object_, [3]).tolist() == [b"x", b"yz", b"3"]
        raw = shm.get_contents_as_numpy(h, np.uint8, [4 * 3 + 4]).tobytes()
        assert raw == serialize_byte_tensor(value).item()


def test_bytes_read_past_the_region_is_an_error(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 12) as h:
        shm.set_shared_memory_region(h, [np.array([100], dtype="<u4")])  # claims 100 bytes
        with pytest.raises(shm.SharedMemoryException, match="BYTES"):
            shm.get_contents_as_numpy(h, np.object_, [1])
        with pytest.raises(shm.SharedMemoryException, match="BYTES"):
            shm.get_contents_as_numpy(h, np.object_, [1], offset=10)


def test_bytes_zero_elements_give_an_empty_array(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 8) as h:
        got = shm.get_contents_as_numpy(h, np.object_, [0, 3])
        assert got.shape == (0, 3) and got.dtype == object


def test_bytes_written_by_tritonclient_read_by_us_and_back(key_factory: KeyFactory) -> None:
    value = np.array([b"one", b"two", b"three"], dtype=object)
    key = key_factory()
    with region("r", key, 64) as ours:
        theirs = tc_attach("t", key, 64)
        try:
            tc_shm.set_shared_memory_region(theirs, [serialize_byte_tensor(value)], offset=4)
            assert shm.get_contents_as_numpy(ours, np.object_, [3], 4).tolist() == value.tolist()
            shm.set_shared_memory_region(ours, [serialize_byte_tensor(value[::-1].copy())], 8)
            got = tc_shm.get_contents_as_numpy(theirs, np.object_, [3], 8)
            assert got.tolist() == value[::-1].tolist()
        finally:
            tc_detach(theirs)


# --- get ---------------------------------------------------------------------------------


def test_get_checks_bounds(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 16) as h:
        assert shm.get_contents_as_numpy(h, np.float32, [4]).shape == (4,)
        assert shm.get_contents_as_numpy(h, np.float32, [2], offset=8).shape == (2,)
        assert shm.get_contents_as_numpy(h, np.float32, [0], offset=16).shape == (0,)
        with pytest.raises(shm.SharedMemoryException, match="too small"):
            shm.get_contents_as_numpy(h, np.float32, [5])
        with pytest.raises(shm.SharedMemoryException, match="too small"):
            shm.get_contents_as_numpy(h, np.float32, [1], offset=13)
        with pytest.raises(shm.SharedMemoryException, match="past the end"):
            shm.get_contents_as_numpy(h, np.float32, [0], offset=17)
        with pytest.raises(shm.SharedMemoryException, match="must not be negative"):
            shm.get_contents_as_numpy(h, np.float32, [-1])
        with pytest.raises(shm.SharedMemoryException, match="must not be negative"):
            shm.get_contents_as_numpy(h, np.float32, [1], offset=-4)


def test_get_accepts_triton_names_and_scalar_shapes(key_factory: KeyFactory) -> None:
    with region("r", key_factory(), 16) as h:
        shm.set_shared_memory_region(h, [np.arange(4, dtype=np.float32)])
        assert shm.get_contents_as_numpy(h, "FP32", 4).tolist() == [0, 1, 2, 3]
        assert shm.get_contents_as_numpy(h, "<f4", (2, 2)).shape == (2, 2)
        with pytest.raises(shm.SharedMemoryException, match="datatype"):
            shm.get_contents_as_numpy(h, "not-a-type", [1])
        with pytest.raises(shm.SharedMemoryException, match="shape"):
            shm.get_contents_as_numpy(h, np.float32, "4")  # type: ignore[arg-type]


def test_reads_agree_with_tritonclient_byte_for_byte(key_factory: KeyFactory) -> None:
    key = key_factory()
    value = np.random.default_rng(7).standard_normal((8, 8)).astype(np.float32)
    with region("r", key, 512) as ours:
        theirs = tc_attach("t", key, 512)
        try:
            tc_shm.set_shared_memory_region(theirs, [value], offset=128)
            ours_view = shm.get_contents_as_numpy(ours, np.float32, [8, 8], offset=128)
            theirs_view = tc_shm.get_contents_as_numpy(theirs, np.float32, [8, 8], offset=128)
            assert np.array_equal(ours_view, theirs_view)
            assert np.array_equal(ours_view, value)
            del ours_view, theirs_view
        finally:
            tc_detach(theirs)


# --- destroy and dead handles ------------------------------------------------------------


def test_double_destroy_is_a_shared_memory_exception(key_factory: KeyFactory) -> None:
    h = shm.create_shared_memory_region("r", key_factory(), 16)
    shm.destroy_shared_memory_region(h)
    with pytest.raises(shm.SharedMemoryException, match="has been destroyed"):
        shm.destroy_shared_memory_region(h)


def test_a_destroyed_handle_refuses_every_operation(key_factory: KeyFactory) -> None:
    h = shm.create_shared_memory_region("r", key_factory(), 16)
    shm.destroy_shared_memory_region(h)
    with pytest.raises(shm.SharedMemoryException, match="has been destroyed"):
        shm.get_contents_as_numpy(h, np.float32, [1])
    with pytest.raises(shm.SharedMemoryException, match="has been destroyed"):
        shm.get_contents_as_numpy(h, np.object_, [1])
    with pytest.raises(shm.SharedMemoryException, match="has been destroyed"):
        shm.set_shared_memory_region(h, [np.zeros(1)])


def test_views_outlive_destroy_with_their_data(key_factory: KeyFactory) -> None:
    key = key_factory()
    h = shm.create_shared_memory_region("r", key, 16)
    shm.set_shared_memory_region(h, [np.arange(4, dtype=np.int32)])
    view = shm.get_contents_as_numpy(h, np.int32, [4])
    shm.destroy_shared_memory_region(h)
    assert not exists(key)  # the name is gone at once ...
    assert view.tolist() == [0, 1, 2, 3]  # ... the memory only when the view goes
    view[0] = 5
    assert view[0] == 5
    del view


def test_handles_not_made_by_create_are_refused() -> None:
    orphan = shm.SharedMemoryRegion("r", "/nothing")
    for call in (
        lambda: shm.get_contents_as_numpy(orphan, np.int8, [1]),
        lambda: shm.set_shared_memory_region(orphan, [np.zeros(1)]),
        lambda: shm.destroy_shared_memory_region(orphan),
    ):
        with pytest.raises(shm.SharedMemoryException, match="not mapped"):
            call()
    with pytest.raises(shm.SharedMemoryException, match="SharedMemoryRegion"):
        shm.get_contents_as_numpy("/key", np.int8, [1])  # type: ignore[arg-type]
    with pytest.raises(shm.SharedMemoryException, match="SharedMemoryRegion"):
        shm.destroy_shared_memory_region(None)  # type: ignore[arg-type]


def test_mapped_regions_lists_keys_not_names(key_factory: KeyFactory) -> None:
    k1, k2 = key_factory(), key_factory()
    with region("name1", k1, 8), region("name2", k2, 8):
        assert sorted(shm.mapped_shared_memory_regions()) == sorted([k1, k2])
