"""The tests' safetensors reader/writer: models/safetensors_np.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "models"))
from safetensors_np import DTYPES, load, save  # noqa: E402,F401
