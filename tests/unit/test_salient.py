from __future__ import annotations

import pytest

from codling.tools.salient import LINE_CHARS, salient_lines

PYTEST = """\
============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.3.3, pluggy-1.5.0
rootdir: /home/u/proj
collected 15 items

tests/test_calc.py ..F..........F                                        [100%]

=================================== FAILURES ===================================
_________________________________ test_divide __________________________________

    def test_divide():
>       assert divide(1, 0) == 0
E       ZeroDivisionError: division by zero

tests/test_calc.py:12: ZeroDivisionError
__________________________________ test_round __________________________________

    def test_round():
>       assert round_to(2.675, 2) == 2.68
E       assert 2.67 == 2.68
E        +  where 2.67 = round_to(2.675, 2)

tests/test_calc.py:30: AssertionError
=========================== short test summary info ============================
FAILED tests/test_calc.py::test_divide - ZeroDivisionError: division by zero
FAILED tests/test_calc.py::test_round - assert 2.67 == 2.68
========================= 2 failed, 13 passed in 0.50s =========================
"""

UNITTEST = """\
..F.E
======================================================================
ERROR: test_load (test_config.ConfigTest.test_load)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/u/proj/test_config.py", line 9, in test_load
    load("missing.toml")
  File "/home/u/proj/config.py", line 4, in load
    with open(path) as f:
         ^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: 'missing.toml'

======================================================================
FAIL: test_port (test_config.ConfigTest.test_port)
----------------------------------------------------------------------
Traceback (most recent call last):
  File "/home/u/proj/test_config.py", line 14, in test_port
    self.assertEqual(cfg.port, 8080)
AssertionError: 80 != 8080

----------------------------------------------------------------------
Ran 5 tests in 0.004s

FAILED (failures=1, errors=1)
"""

UNITTEST_OK = """\
.....
----------------------------------------------------------------------
Ran 5 tests in 0.001s

OK
"""

JEST = """\
 FAIL  src/sum.test.js
  ● sum › adds two numbers

    expect(received).toBe(expected) // Object.is equality

    Expected: 3
    Received: 4

      3 | test('adds two numbers', () => {
    > 4 |   expect(sum(1, 2)).toBe(3);
        |                     ^

 PASS  src/util.test.js

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 5 passed, 6 total
Snapshots:   0 total
Time:        0.812 s
Ran all test suites.
"""

CARGO = """\
   Compiling calc v0.1.0 (/home/u/calc)
    Finished `test` profile [unoptimized + debuginfo] target(s) in 0.61s
     Running unittests src/lib.rs (target/debug/deps/calc-5f3c1e2a)

running 3 tests
test tests::adds ... ok
test tests::divides ... FAILED
test tests::rounds ... ok

failures:

---- tests::divides stdout ----
thread 'tests::divides' panicked at src/lib.rs:21:9:
assertion `left == right` failed
  left: 2
 right: 3
note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace


failures:
    tests::divides

test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

error: test failed, to rerun pass `--lib`
"""

GO = """\
=== RUN   TestAdd
--- PASS: TestAdd (0.00s)
=== RUN   TestSub
    calc_test.go:14: Sub(3, 1) = 4; want 2
--- FAIL: TestSub (0.00s)
FAIL
FAIL\texample.com/calc\t0.003s
ok  \texample.com/calc/util\t0.002s
"""

TRACEBACK = """\
Starting the import of 3 files
Traceback (most recent call last):
  File "/home/u/proj/run.py", line 3, in <module>
    main()
  File "/home/u/proj/run.py", line 1, in main
    import yaml
ModuleNotFoundError: No module named 'yaml'
"""

GCC = """\
gcc -Wall -c main.c -o main.o
main.c: In function 'main':
main.c:5:12: error: 'count' undeclared (first use in this function)
    5 |     return count;
      |            ^~~~~
main.c:5:12: note: each undeclared identifier is reported only once for each function it appears in
make: *** [Makefile:3: main.o] Error 1
"""

RUSTC = """\
   Compiling calc v0.1.0 (/home/u/calc)
error[E0308]: mismatched types
 --> src/main.rs:4:18
  |
4 |     let x: i32 = "five";
  |            ---   ^^^^^^ expected `i32`, found `&str`
  |            |
  |            expected due to this

For more information about this error, try `rustc --explain E0308`.
error: could not compile `calc` (bin "calc") due to 1 previous error
"""

GIT = "fatal: not a git repository (or any of the parent directories): .git\n"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        pytest.param(
            PYTEST,
            (
                "E       ZeroDivisionError: division by zero",
                "tests/test_calc.py:12: ZeroDivisionError",
                "E       assert 2.67 == 2.68",
                "E        +  where 2.67 = round_to(2.675, 2)",
                "tests/test_calc.py:30: AssertionError",
                "FAILED tests/test_calc.py::test_divide - ZeroDivisionError: division by zero",
                "FAILED tests/test_calc.py::test_round - assert 2.67 == 2.68",
                "========================= 2 failed, 13 passed in 0.50s =========================",
            ),
            id="pytest",
        ),
        pytest.param(
            UNITTEST,
            (
                "ERROR: test_load (test_config.ConfigTest.test_load)",
                "Traceback (most recent call last):",
                "FileNotFoundError: [Errno 2] No such file or directory: 'missing.toml'",
                "FAIL: test_port (test_config.ConfigTest.test_port)",
                "AssertionError: 80 != 8080",
                "Ran 5 tests in 0.004s",
                "FAILED (failures=1, errors=1)",
            ),
            id="unittest",
        ),
        pytest.param(UNITTEST_OK, ("Ran 5 tests in 0.001s", "OK"), id="unittest-ok"),
        pytest.param(
            JEST,
            (
                "FAIL  src/sum.test.js",
                "Test Suites: 1 failed, 1 passed, 2 total",
                "Tests:       1 failed, 5 passed, 6 total",
            ),
            id="jest",
        ),
        pytest.param(
            CARGO,
            (
                "test tests::divides ... FAILED",
                "thread 'tests::divides' panicked at src/lib.rs:21:9:",
                "assertion `left == right` failed",
                "test result: FAILED. 2 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s",
                "error: test failed, to rerun pass `--lib`",
            ),
            id="cargo",
        ),
        pytest.param(
            GO,
            (
                "--- FAIL: TestSub (0.00s)",
                "FAIL",
                "FAIL\texample.com/calc\t0.003s",
                "ok  \texample.com/calc/util\t0.002s",
            ),
            id="go",
        ),
        pytest.param(
            TRACEBACK,
            ("Traceback (most recent call last):", "ModuleNotFoundError: No module named 'yaml'"),
            id="python-traceback",
        ),
        pytest.param(
            'Traceback (most recent call last):\n  File "w.py", line 9, in <module>\n    wait()\nKeyboardInterrupt\n',
            ("Traceback (most recent call last):", "KeyboardInterrupt"),
            id="traceback-ending-in-an-exception-without-a-message",
        ),
        pytest.param(
            GCC,
            (
                "main.c:5:12: error: 'count' undeclared (first use in this function)",
                "make: *** [Makefile:3: main.o] Error 1",
            ),
            id="gcc",
        ),
        pytest.param(
            RUSTC,
            (
                "error[E0308]: mismatched types",
                "--> src/main.rs:4:18",
                "For more information about this error, try `rustc --explain E0308`.",
                'error: could not compile `calc` (bin "calc") due to 1 previous error',
            ),
            id="rustc",
        ),
        pytest.param(GIT, ("fatal: not a git repository (or any of the parent directories): .git",), id="git"),
        pytest.param(
            "total 12\n\ndrwxr-xr-x 2 u u 4096 a\n-rw-r--r-- 1 u u  120 README.md\n-rw-r--r-- 1 u u  80 setup.py\n\n",
            ("total 12", "drwxr-xr-x 2 u u 4096 a", "-rw-r--r-- 1 u u  120 README.md", "-rw-r--r-- 1 u u  80 setup.py"),
            id="nothing-matches-keeps-the-last-lines",
        ),
        pytest.param("", (), id="empty"),
        pytest.param("\n  \n", (), id="blank"),
    ],
)
def test_salient_lines(output: str, expected: tuple[str, ...]) -> None:
    assert salient_lines(output) == expected


def test_the_test_summary_outranks_failures_when_lines_are_short() -> None:
    # 30 failures then the summary: the summary line survives, the first failures fill the rest.
    failures = "".join(f"FAILED tests/test_a.py::test_{i} - assert 0\n" for i in range(30))
    output = failures + "============ 30 failed, 2 passed in 1.20s ============\n"
    assert salient_lines(output, max_lines=3) == (
        "FAILED tests/test_a.py::test_0 - assert 0",
        "FAILED tests/test_a.py::test_1 - assert 0",
        "============ 30 failed, 2 passed in 1.20s ============",
    )


def test_exceptions_outrank_detail_lines() -> None:
    assert salient_lines(TRACEBACK, max_lines=1) == ("ModuleNotFoundError: No module named 'yaml'",)


def test_repeated_lines_are_kept_once() -> None:
    output = "error: disk full\nretrying\nerror: disk full\nerror: disk full\ngave up\n"
    assert salient_lines(output) == ("error: disk full",)


def test_the_last_lines_when_nothing_matches_are_limited_and_deduplicated() -> None:
    output = "\n".join(f"line {i}" for i in range(20)) + "\nline 19\n"
    assert salient_lines(output, max_lines=3) == ("line 17", "line 18", "line 19")


def test_lines_are_clipped_and_the_total_is_bounded() -> None:
    long = "error: " + "x" * 500
    (line,) = salient_lines(long)
    assert line == long[: LINE_CHARS - 1] + "…"
    many = "".join(f"error {i}: " + "y" * 150 + "\n" for i in range(8))
    kept = salient_lines(many, max_lines=8, max_chars=400)
    assert sum(len(k) for k in kept) <= 400
    assert [k[:8] for k in kept] == ["error 0:", "error 1:", "error 2:"]
    assert kept[-1].endswith("…")
    assert salient_lines(PYTEST, max_lines=0) == ()
    assert salient_lines(PYTEST, max_chars=0) == ()


def test_colours_and_progress_rewrites_are_removed() -> None:
    output = "\x1b[31mFAILED\x1b[0m tests/a.py::t\nDownloading 10%\rDownloading 100%\r\n"
    assert salient_lines(output) == ("FAILED tests/a.py::t",)
    assert salient_lines("Downloading 10%\rDownloading 100%\r\n") == ("Downloading 100%",)
