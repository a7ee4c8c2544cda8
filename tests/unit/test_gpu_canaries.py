"""The GPU backend's canary zones, checked without a GPU.

The functions under test are the ones ``GpuBackend.launch`` calls (``to_device``,
``kernel_arg``, ``from_device``); only ``pycuda.driver`` is replaced, by :class:`HostMemory`,
which keeps device memory in one host array. A "kernel" here writes through the pointer the
real launch would pass, so a wrong offset anywhere in the layout fails these tests.
"""

import numpy as np
import pytest

from autograder.backends.gpu import CANARY_BYTES, from_device, gpu_available, kernel_arg, to_device
from autograder.contract import Buffer


class HostMemory:
    """The four ``pycuda.driver`` calls the canary layout makes, over a host byte array.

    Fresh memory holds random bytes, as a real allocation may: a zone the layout forgot to
    set would then read as written.
    """

    def __init__(self):
        self.memory = np.random.default_rng().integers(0, 256, 1 << 20, dtype=np.uint8)
        self.next = 256  # address 0 stays unused, as a null pointer

    def mem_alloc(self, nbytes: int) -> int:
        address, self.next = self.next, self.next + nbytes
        return address

    def memset_d8(self, address, byte: int, count: int) -> None:
        self.memory[int(address) : int(address) + count] = byte

    def memcpy_htod(self, address, host: np.ndarray) -> None:
        self.memory[int(address) : int(address) + host.nbytes] = host.reshape(-1).view(np.uint8)

    def memcpy_dtoh(self, host: np.ndarray, address) -> None:
        host.reshape(-1).view(np.uint8)[:] = self.memory[int(address) : int(address) + host.nbytes]


def _launched(buffer: Buffer, written: list[int] = (), canary: int = CANARY_BYTES, byte_offset: int = 0):
    """Place ``buffer`` as a launch does, write elements at ``written`` (relative to the pointer
    the kernel gets) with a byte pattern that is not the canary's, read it back as a launch does."""
    driver = HostMemory()
    allocation = to_device(driver, buffer, canary)
    pointer = int(kernel_arg(buffer, {buffer.name: allocation}, canary))
    itemsize = buffer.data.dtype.itemsize
    for i in written:
        at = pointer + i * itemsize + byte_offset
        driver.memory[at : at + (1 if byte_offset else itemsize)] = 0x3F
    return from_device(driver, buffer, allocation, canary)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int8"])
def test_an_untouched_buffer_has_no_findings_and_keeps_its_contents(dtype):
    buffer = Buffer("x", np.random.default_rng().uniform(-9, 9, 1000).astype(dtype))
    contents, findings = _launched(buffer)
    assert findings == []
    np.testing.assert_array_equal(contents, buffer.data)


def test_writes_past_the_end_name_the_element_range():
    buffer = Buffer("y", np.full(1000, np.nan, np.float32), is_output=True)
    _contents, [finding] = _launched(buffer, [1000, 1001, 1002, 1003])
    assert finding.message == "y[1000..1003] written past the end (n = 1000 elements)"
    assert (finding.kind, finding.check, finding.array, finding.index, finding.bound) == (
        "out_of_bounds_write",
        "bounds",
        "y",
        1000,
        1000,
    )


def test_writes_inside_the_array_are_its_contents_not_findings():
    buffer = Buffer("y", np.zeros(8, np.float32), is_output=True)
    contents, findings = _launched(buffer, [0, 7])
    assert findings == [] and contents.view(np.uint8)[:4].tolist() == [0x3F] * 4
    assert contents[7] == contents[0] and not contents[1:7].any()


def test_writes_before_the_start_and_scattered_writes():
    buffer = Buffer("y", np.zeros(10, np.float64))
    _contents, (before, after) = _launched(buffer, [-3, 10, 20])
    assert before.message == "y[-3] written before the start (n = 10 elements)"
    assert after.message == "y[10..20] written past the end (n = 10 elements; 2 of those elements changed)"


def test_one_changed_byte_counts_as_its_element():
    buffer = Buffer("y", np.zeros(5, np.float32))
    _contents, [finding] = _launched(buffer, [6], byte_offset=2)  # a byte inside element 6
    assert finding.message == "y[6] written past the end (n = 5 elements)"


def test_a_one_element_buffer_has_one_element():
    _contents, [finding] = _launched(Buffer("y", np.zeros(1, np.float32)), [1])
    assert finding.message == "y[1] written past the end (n = 1 element)"


def test_an_empty_buffer_is_all_canary():
    _contents, findings = _launched(Buffer("y", np.zeros(0, np.float32)), [0])
    assert [f.message for f in findings] == ["y[0] written past the end (n = 0 elements)"]


def test_without_canaries_the_buffer_is_exact():
    buffer = Buffer("y", np.arange(1, 6, dtype=np.float32), is_output=True)
    driver = HostMemory()
    allocation = to_device(driver, buffer, 0)
    assert driver.next - int(allocation) == buffer.data.nbytes
    assert int(kernel_arg(buffer, {"y": allocation}, 0)) == allocation
    contents, findings = from_device(driver, buffer, allocation, 0)
    assert findings == []
    np.testing.assert_array_equal(contents, buffer.data)


def test_gpu_is_unavailable_without_pycuda(monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    gpu_available.cache_clear()
    try:
        assert gpu_available() is False
    finally:
        gpu_available.cache_clear()


class _Driver(HostMemory):
    """Enough of ``pycuda.driver`` for ``GpuBackend.launch``: events that are done at once, and
    copies in or out that fail as the H200's did on 2026-12-03 when ``failing`` names them."""

    class Error(Exception):
        pass

    Context = type("Context", (), {"synchronize": staticmethod(lambda: None)})

    def __init__(self, failing: str = ""):
        super().__init__()
        self.failing = failing

    def memcpy_htod(self, address, host):
        if self.failing == "in":
            raise self.Error("cuMemcpyHtoD failed: out of memory")
        super().memcpy_htod(address, host)

    def memcpy_dtoh(self, host, address):
        if self.failing == "out":
            raise self.Error("cuMemcpyDtoH failed: invalid argument")
        super().memcpy_dtoh(host, address)

    def Event(self):  # noqa: N802 - pycuda's name
        return type(
            "Event",
            (),
            {
                "record": _nothing,
                "query": lambda s: True,
                "synchronize": _nothing,
                "time_till": lambda s, other: 0.5,
            },
        )()

    def free(self, *args):
        pass


def _nothing(*args, **kwargs):
    pass


def _backend(driver, kernel=_nothing):
    import contextlib

    from autograder.backends import gpu

    backend = object.__new__(gpu.GpuBackend)  # no PyCUDA here: only what launch() reads
    backend.driver, backend.canary_bytes, backend._failure = driver, CANARY_BYTES, None
    backend.active = contextlib.nullcontext
    backend.function = lambda program, shared_bytes=0: kernel
    backend._free = lambda allocations: None
    return backend


def _launch():
    from autograder.contract import Launch, Program

    data = np.random.default_rng().uniform(-1, 1, 256).astype(np.float32)
    return Launch(Program("k", "k.cu", "k"), (1, 1, 1), (256, 1, 1), (Buffer("x", data, is_output=True),))


@pytest.mark.parametrize("failing", ["in", "out"])
def test_a_failed_copy_to_or_from_the_gpu_is_the_graders_fault_not_the_kernels(failing):
    """Copies run before the kernel or after it finished (its faults surface when it is waited
    for): their failure is a grader fault (grading flags the item for regrading), never a
    BackendError, which grading writes to the student as the kernel's."""
    from autograder.backends.gpu import GraderCudaFault
    from autograder.contract import BackendError

    with pytest.raises(GraderCudaFault, match="copy between the host and the GPU failed") as raised:
        _backend(_Driver(failing)).launch(_launch())
    assert not isinstance(raised.value, BackendError)
    ok = _backend(_Driver()).launch(_launch())
    assert ok.findings == [] and ok.elapsed_ms == 0.5


def test_a_launch_the_driver_refuses_is_still_the_kernels():
    from autograder.contract import LaunchFailure

    driver = _Driver()

    def refused(*args, **launch):
        raise driver.Error("cuLaunchKernel failed: invalid argument")

    with pytest.raises(LaunchFailure, match="the GPU refused the launch: invalid argument"):
        _backend(driver, refused).launch(_launch())
