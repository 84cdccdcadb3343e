"""The description JSON a step library carries (hc_step_get_api()->
description_json; docs/architecture.md, "The plan and the description"),
read with ctypes: the library is loaded, not run."""
import ctypes
import json
import os


def description(lib, libdir):
    """The description of step library `lib`; `libdir` holds libhcrt.so."""
    ctypes.CDLL(os.path.join(libdir, "libhcrt.so"), mode=ctypes.RTLD_GLOBAL)

    class Api(ctypes.Structure):
        _fields_ = [("abi_version", ctypes.c_uint32), ("description_json", ctypes.c_char_p)]

    so = ctypes.CDLL(os.path.abspath(lib))
    so.hc_step_get_api.restype = ctypes.POINTER(Api)
    return json.loads(so.hc_step_get_api().contents.description_json.decode())
