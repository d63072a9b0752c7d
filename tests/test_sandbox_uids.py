"""Sandbox uids are never handed out twice while their sandbox lives (a counter modulo 256 did:
closing the older sandbox then killed the newer one's kernel under --unsafe-sandbox)."""

from __future__ import annotations

import pytest

from tsbench.harness.runtime import limits


def test_a_live_uid_is_never_handed_out_again():
    held = [limits.allocate_uid() for _ in range(limits.UID_SLOTS - len(limits.live_uids()))]
    try:
        assert len(set(held)) == len(held)
        with pytest.raises(RuntimeError, match="in use"):
            limits.allocate_uid()  # all slots live: refused, never a repeat
        freed = held.pop(100)
        limits.release_uid(freed)
        assert limits.allocate_uid() == freed  # the only free slot
        held.append(freed)
    finally:
        for uid in held:
            limits.release_uid(uid)


def test_many_short_lived_sandboxes_beside_one_long_lived():
    long_lived = limits.allocate_uid()
    try:
        for _ in range(3 * limits.UID_SLOTS):
            uid = limits.allocate_uid()
            assert uid != long_lived
            limits.release_uid(uid)
    finally:
        limits.release_uid(long_lived)
    assert long_lived not in limits.live_uids()
