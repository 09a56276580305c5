"""The binding step's promises under mutation: each case changes one line of src/ so that one
promise a user relies on breaks, runs the tests that guard that promise, and counts the change as
caught (a test failed) or survived (every test passed: the promise is untested).

    .venv/bin/python tools/mutations.py            # every case; prints caught / survived
    .venv/bin/python tools/mutations.py --list     # the cases, without running them
    .venv/bin/python tools/mutations.py -k receipt # the cases whose name has "receipt"

``.ci/run`` runs it on demand (``OMDS_LD_MUTATIONS=1``); it exits 1 where a case survived or no
longer applies (its line changed: the case must follow the code). The source file is restored
after each case, whatever happened; the tests run in a process of their own.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "omds_ld"


@dataclass(frozen=True)
class Case:
    name: str  # the promise that breaks
    path: str  # below src/omds_ld
    old: str  # the line as it is (exactly once in the file)
    new: str  # the line broken
    tests: tuple[str, ...]  # the tests that guard the promise (pytest node ids or files)


CASES = (
    # the first cases: the twelve changes that survived a review's run of the tests (#48)
    Case("the page takes a form from its own origin only", "mcp/confirmation_page.py",
         "        if origin is not None and origin != _origin(self.page_base):",
         "        if False:",
         ("tests/mcp/test_binding_promises.py::test_the_page_takes_a_form_only_from_its_own_origin",)),
    Case("a page yes for a call without a key is spent by that call", "mcp/confirm.py",
         '        raw = await self.state.pop(f"confirm:given:{digest}")',
         '        raw = await self.state.get(f"confirm:given:{digest}")',
         ("tests/mcp/test_binding_promises.py::test_a_page_yes_for_a_call_without_a_key_is_spent_by_that_call",)),
    Case("a round trip's answer confirms one call once", "mcp/confirm.py",
         '        raw = await self.state.pop(f"confirm:pending:{pending}")',
         '        raw = await self.state.get(f"confirm:pending:{pending}")',
         ("tests/mcp/test_binding_promises.py::test_a_round_trip_answer_confirms_one_call_once",)),
    Case("the receipt names this offer", "norm/receipt.py",
         '    expected = {\n        "offer_digest": str(consent.get("bc:offerDigest", "")),',
         '    expected = {\n        "offer_digest": str(claims.get("offer_digest", "")),',
         ("tests/insurer/test_receipts.py",)),
    Case("the receipt names the text shown", "norm/receipt.py",
         '        "shown": str(confirmation.get("bc:shownDigest", "")),\n        "application"',
         '        "shown": str(claims.get("shown", "")),\n        "application"',
         ("tests/insurer/test_receipts.py",)),
    Case("the receipt names the confirming person", "norm/receipt.py",
         '        "consent": consent_digest(consent),\n        "sub": str(confirmation.get("bc:confirmedBy", "")),',
         '        "consent": consent_digest(consent),\n        "sub": str(claims.get("sub", "")),',
         ("tests/insurer/test_receipts.py",)),
    Case("a contract start before the insurer's today is refused", "insurer/service.py",
         "                if start >= today:",
         "                if start >= today - dt.timedelta(days=1):",
         ("tests/insurer/test_flows.py::test_the_insurers_today_in_answers_and_no_contract_that_starts_in_the_past",)),
    Case("the insurer's today is in its time zone", "insurer/answers.py",
         "        return self.clock().astimezone(self.zone).date()",
         "        return self.clock().date()",
         ("tests/insurer/test_dates.py",)),
    Case("an application's start is not before the insurer's today", "insurer/applications.py",
         "        if start is not None and start < today:",
         "        if False:",
         ("tests/insurer/test_dates.py",)),
    Case("an answer never unfolds into gigabytes", "mcp/http_client.py",
         "                chunk = inflate.decompress(chunk, limit - size + 1)",
         "                chunk = inflate.decompress(chunk)",
         ("tests/mcp/test_transport.py",)),
    Case("a trickled metadata document is cut at the deadline", "auth/cimd.py",
         "TIMEOUT_SECONDS = 3.0",
         "TIMEOUT_SECONDS = 15.0",
         ("tests/auth/test_cimd.py::test_a_host_that_trickles_its_head_is_cut_at_the_deadline_and_holds_no_interface",)),
    Case("of age on the 18th birthday, not a year later", "insurer/constraints.py",
         "            if birthday(born, born.year + years) > today:",
         "            if birthday(born, born.year + years + 1) > today:",
         ("tests/insurer/test_constraints.py::test_of_age_on_the_18th_birthday_by_the_calendar",)),
    # the same promises' neighbours, and those this round added
    Case("of age by the calendar, not on the 28th", "insurer/constraints.py",
         "            if birthday(born, born.year + years) > today:",
         "            if dt.date(born.year + years, born.month, min(born.day, 28)) > today:",
         ("tests/insurer/test_constraints.py::test_of_age_on_the_18th_birthday_by_the_calendar",)),
    Case("the start and the age against the insurer's today, not UTC's", "insurer/desk.py",
         "            body, offered_at, now, self.insurer.language, self.answers.today()",
         "            body, offered_at, now, self.insurer.language, now.date()",
         ("tests/insurer/test_dates.py",)),
    Case("the receipt names the application's data", "norm/receipt.py",
         '        "application": application_digest(application),\n    }\n    wrong',
         "    }\n    wrong",
         ("tests/insurer/test_receipts.py",)),
    Case("a receipt makes one application", "insurer/desk.py",
         "        self._spend(receipt, application, offer)",
         "        pass",
         ("tests/insurer/test_receipts.py",)),
    Case("a yes is the boolean yes", "mcp/confirm.py",
         '    return action == "accept" and (content or {}).get("confirm") is True',
         '    return action == "accept" and bool((content or {}).get("confirm"))',
         ("tests/mcp/test_applications.py::test_only_the_boolean_yes_binds_in_either_era",)),
    Case("nothing nobody said is filled in for the person", "mcp/confirm.py",
         '        if told.get(key) and not (key == "bc:consentedAt" and flagged):',
         '        if not (key == "bc:consentedAt" and flagged):',
         ("tests/mcp/test_consent.py",)),
    Case("a consent from before the offer is refused", "norm/consent.py",
         "    if offered_at is not None and value < offered_at - CLOCK_SKEW:",
         "    if False:",
         ("tests/mcp/test_consent.py",)),
    Case("a consent's time has its offset", "norm/consent.py",
         "    if value.tzinfo is None:",
         "    if False:",
         ("tests/mcp/test_consent.py",)),
    # (removing _without_confirmation's pop alone is no case: _with_confirmation replaces the
    # caller's bc:confirmation as well, and the two guard the promise together)
    Case("the insurer receives the person's consent, not the model's", "mcp/gate.py",
         '        body["bc:consent"] = {**confirmed.consent, "bc:confirmation": confirmed.to_jsonld()}',
         '        body["bc:consent"] = {**confirmed.consent, **(body.get("bc:consent") or {}), '
         '"bc:confirmation": confirmed.to_jsonld()}',
         ("tests/mcp/test_consent.py",)),
    Case("the confirmation page answers only the broker it asked for", "mcp/confirmation_page.py",
         "        if not expected or not hmac.compare_digest(person.subject, expected):",
         "        if not expected:",
         ("tests/auth/test_confirmation_login.py",)),
)  # fmt: skip


def apply(case: Case) -> tuple[Path, str] | None:
    """The case's change written into its file (the file's text before, to restore it); None
    where its line is not there exactly once."""
    path = SRC / case.path
    text = path.read_text("utf-8")
    if text.count(case.old) != 1:
        return None
    path.write_text(text.replace(case.old, case.new), "utf-8")
    return path, text


def run(case: Case, timeout: float) -> str:
    """caught, survived, or stale (the line it changes is not there)."""
    applied = apply(case)
    if applied is None:
        return "stale"
    path, before = applied
    try:
        tests = subprocess.run(
            [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p",
             "no:randomly", *case.tests],
            cwd=ROOT, capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        return "survived" if tests.returncode == 0 else "caught"
    except subprocess.TimeoutExpired:
        return "caught"  # the tests did not pass: a hang is a failure too
    finally:
        path.write_text(before, "utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", default="", help="only the cases whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    parser.add_argument("--timeout", type=float, default=600, help="seconds for one case's tests")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if args.k in c.name]
    if args.list:
        for case in cases:
            print(f"{case.path:28} {case.name}")
        return 0
    counts = {"caught": 0, "survived": 0, "stale": 0}
    for case in cases:
        started = time.monotonic()
        outcome = run(case, args.timeout)
        counts[outcome] += 1
        print(
            f"{outcome:8} {time.monotonic() - started:6.1f} s  {case.path}: {case.name}", flush=True
        )
    print(f"mutations: {counts['caught']} caught, {counts['survived']} survived, "
          f"{counts['stale']} stale, of {len(cases)}")  # fmt: skip
    return 0 if counts["survived"] == counts["stale"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
