"""CompileOptions and XLC_FLAGS parsing."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from xlc.errors import ArgumentError
from xlc.options import CompileOptions, parse_flags


def test_parse_flags_values_and_switches():
    kw = parse_flags("--dump-to=/tmp/d --dump-pass-re=.* --verify --no-fusion --opt-level=2")
    opts = CompileOptions(**kw)
    assert opts.dump_to == "/tmp/d"
    assert opts.dump_pass_re == ".*"
    assert opts.verify is True
    assert opts.fusion is False
    assert opts.opt_level == 2


def test_unknown_flag_is_named():
    with pytest.raises(ArgumentError, match=r"XLC_FLAGS: unknown flag --dump-too"):
        parse_flags("--dump-too=/tmp")


def test_flag_without_dashes():
    with pytest.raises(ArgumentError, match=r"expected --flag or --flag=value, got 'verify'"):
        parse_flags("verify")


def test_options_are_frozen_and_keyed():
    a = CompileOptions()
    with pytest.raises(ValidationError, match="frozen"):
        a.verify = True  # type: ignore[misc]
    b = a.replace(dump_to="/tmp/x", verify=True)
    assert a.cache_key() == b.cache_key()  # dumps and verification don't change code
    assert a.cache_key() != a.replace(opt_level=1).cache_key()


def test_invalid_option_value():
    with pytest.raises(ValidationError, match="opt_level"):
        CompileOptions(opt_level=7)


def test_replace_validates_like_the_constructor():
    opts = CompileOptions()
    assert opts.replace(opt_level=1).opt_level == 1
    with pytest.raises(ArgumentError, match=r"CompileOptions: opt_level=7: Input should be "
                                            r"less than or equal to 3"):
        opts.replace(opt_level=7)
    with pytest.raises(ArgumentError, match=r"CompileOptions: bogus=1: Extra inputs"):
        opts.replace(bogus=1)


def test_cache_dir_flag():
    assert CompileOptions(**parse_flags("--cache-dir=/tmp/c")).cache_dir == "/tmp/c"
