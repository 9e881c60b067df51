"""kraft.trio_run: strict exception groups on every trio version, and one error out of
nested nurseries reaches synchronous callers as itself."""

from __future__ import annotations

import pytest
import trio

from kraft.trio_run import run_trio, sole_exception


async def _fail_in_nurseries(*errors: BaseException) -> None:
    async def raise_(error):
        raise error

    async with trio.open_nursery() as outer:
        async with trio.open_nursery() as inner:
            for error in errors:
                inner.start_soon(raise_, error)
        await trio.sleep_forever()
    outer.cancel_scope.cancel()


def test_returns_the_result():
    async def answer(x):
        await trio.sleep(0)
        return x * 2

    assert run_trio(answer, 21) == 42


def test_one_error_out_of_nested_nurseries_is_itself():
    with pytest.raises(KeyError, match="lost"):
        run_trio(_fail_in_nurseries, KeyError("lost"))
    with pytest.raises(SystemExit) as info:  # a SIGTERM handler's exit status survives
        run_trio(_fail_in_nurseries, SystemExit(143))
    assert info.value.code == 143


def test_several_errors_stay_a_group():
    with pytest.raises(ExceptionGroup) as info:
        run_trio(_fail_in_nurseries, KeyError("a"), ValueError("b"))
    assert sole_exception(info.value) is None
    assert {type(e) for e in info.value.exceptions[0].exceptions} == {KeyError, ValueError}


def test_groups_are_strict_on_every_trio_version():
    async def caught_as():
        try:
            async with trio.open_nursery():
                raise KeyError("x")
        except BaseException as error:
            return type(error).__name__

    assert run_trio(caught_as) == "ExceptionGroup"
