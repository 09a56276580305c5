"""``omds-ld tools diff``: pairs of norm files made here, each with the verdict a maintainer and an
agent rely on; a deprecated operation still served and marked, its removal breaking."""

from __future__ import annotations

import asyncio
import copy
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from omds_ld.contract.sources import last_release
from omds_ld.contract.tools import bump_of
from omds_ld.mcp.condense import answer_of
from omds_ld.norm.catalogue import _data_text
from tests.insurer.test_flows import SKODA
from tests.mcp.clients import Client, follow, stdio_parameters, step
from tests.servers import ExampleServer

Norm = dict[str, Any]


def current() -> Norm:
    document: Norm = yaml.safe_load(_data_text("openapi.yaml"))
    return document


def operation(document: Norm, operation_id: str) -> dict[str, Any]:
    for item in document["paths"].values():
        for raw in item.values():
            if isinstance(raw, dict) and raw.get("operationId") == operation_id:
                return raw
    raise KeyError(operation_id)


def write(folder: Path, name: str, document: Norm) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), "utf-8")
    return path


def tools_diff(*args: str | Path) -> tuple[int, dict[str, Any], str]:
    """The CLI as a maintainer runs it: its exit code, its JSON (written to a file) and its text
    (printed), from one run."""
    with tempfile.TemporaryDirectory() as folder:
        written = Path(folder) / "diff.json"
        command = [sys.executable, "-m", "omds_ld.cli", "tools", "diff", *map(str, args),
                   "--json", str(written)]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert written.exists(), done.stderr
        return done.returncode, json.loads(written.read_text()), done.stdout


def tool(report: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in report["tools"] if t["tool"] == name)


def changed(
    tmp_path: Path, change: Callable[[Norm], None], version: str = "1.0.0", *flags: str
) -> tuple[int, dict[str, Any], str]:
    before = current()
    after = copy.deepcopy(before)
    change(after)
    after["info"]["version"] = version
    return tools_diff(write(tmp_path, "old", before), write(tmp_path, "new", after), *flags)


def rename_field(document: Norm) -> None:
    schema = document["components"]["schemas"]["CalculationRequest"]
    schema["properties"]["p:rootProduct"] = schema["properties"].pop("p:hasRootProduct")
    schema["required"] = [
        "p:rootProduct" if r == "p:hasRootProduct" else r for r in schema["required"]
    ]


def test_a_renamed_field_breaks(tmp_path: Path) -> None:
    code, report, text = changed(tmp_path, rename_field)
    assert code == 1
    found = tool(report, "createCalculation")
    assert found["breaking"] and found["level"] == "major"
    assert {"where": "body.p:hasRootProduct", "what": "renamed", "detail": "now p:rootProduct",
            "level": "major", "breaking": True} in found["changes"]  # fmt: skip
    assert "! body.p:hasRootProduct: renamed: now p:rootProduct" in text
    assert report["needs"] == "major" and report["versionOk"] is True  # 0.2.0 → 1.0.0


def test_a_narrowed_range_breaks_and_a_widened_one_does_not(tmp_path: Path) -> None:
    def narrow(document: Norm) -> None:
        document["components"]["schemas"]["Scalar"]["anyOf"][0]["maxLength"] = 100

    code, report, _ = changed(tmp_path, narrow)
    assert code == 1
    change = next(c for c in tool(report, "setAttributes")["changes"] if c["what"] == "narrowed")
    assert change["detail"] == "maxLength 1000 → 100" and change["breaking"]
    assert change["where"].startswith("body.")

    def widen(document: Norm) -> None:
        document["components"]["schemas"]["Scalar"]["anyOf"][0]["maxLength"] = 2000

    code, report, _ = changed(tmp_path, widen, "0.3.0")
    assert code == 0, report
    change = next(c for c in tool(report, "setAttributes")["changes"] if c["what"] == "widened")
    assert change["detail"] == "maxLength 1000 → 2000" and not change["breaking"]
    assert report["needs"] == "minor" and report["versionOk"] is True


def test_a_new_required_field_breaks_an_optional_one_does_not(tmp_path: Path) -> None:
    def require(document: Norm) -> None:
        schema = document["components"]["schemas"]["OfferRequest"]
        schema["properties"]["bc:channel"] = {"type": "string", "maxLength": 40}
        schema["required"] = ["bc:channel"]

    code, report, text = changed(tmp_path, require)
    assert code == 1
    change = tool(report, "createOffer")["changes"][-1]
    assert (change["where"], change["what"], change["breaking"]) == ("body.bc:channel", "field added", True)  # fmt: skip
    assert "required: every call must send it" in text

    def offer(document: Norm) -> None:
        schema = document["components"]["schemas"]["OfferRequest"]
        schema["properties"]["bc:channel"] = {"type": "string", "maxLength": 40}

    code, report, _ = changed(tmp_path, offer, "0.3.0")
    assert code == 0
    assert tool(report, "createOffer")["level"] == "minor"


def test_a_removed_tool_breaks_and_says_it_was_never_deprecated(tmp_path: Path) -> None:
    def remove(document: Norm) -> None:
        for item in document["paths"].values():
            item.pop("get", None) if item.get("get", {}).get("operationId") == "readOffer" else None

    code, report, text = changed(tmp_path, remove)
    assert code == 1
    found = tool(report, "readOffer")
    assert found["status"] == "removed" and found["breaking"]
    assert found["tokens"]["after"] is None and found["tokens"]["before"] > 0
    assert "removed without being deprecated first" in text


def test_a_changed_description_is_a_patch_with_its_words(tmp_path: Path) -> None:
    def reword(document: Norm) -> None:
        raw = operation(document, "listProducts")
        raw["description"] = raw["description"].replace("The start of every task", "Where every task starts")  # fmt: skip

    code, report, text = changed(tmp_path, reword, "0.2.1")
    assert code == 0
    found = tool(report, "listProducts")
    assert found["level"] == "patch" and not found["breaking"]
    assert "[-The start of-] {+Where+} every [-task:-] {+task starts:+} list the products" in text
    assert found["tokens"]["before"] != found["tokens"]["after"]
    assert report["versionOk"] is True and report["bump"] == "minor"  # 0.2.1 in 0.x: a minor step


def test_a_renamed_tool_breaks(tmp_path: Path) -> None:
    def rename(document: Norm) -> None:
        operation(document, "readOffer")["operationId"] = "showOffer"

    code, report, _ = changed(tmp_path, rename)
    assert code == 1
    found = tool(report, "showOffer")
    assert found["status"] == "renamed" and found["renamedFrom"] == "readOffer"
    assert all(t["tool"] != "readOffer" for t in report["tools"])


def test_the_version_must_follow_the_changes(tmp_path: Path) -> None:
    code, report, text = changed(tmp_path, rename_field, "0.2.1", "--allow-breaking")
    assert code == 1 and report["versionOk"] is False
    assert "NOT what the changes need" in text
    code, report, _ = changed(tmp_path, rename_field, "0.3.0", "--allow-breaking")
    assert code == 0 and report["versionOk"] is True
    assert (bump_of("0.2.0", "0.3.0"), bump_of("1.4.2", "1.5.0"), bump_of("1.4.2", "2.0.0")) == (
        "major", "minor", "major",
    )  # fmt: skip
    assert bump_of("1.4.2", "1.4.1") == "lower" and bump_of("0.2.0", "0.2.0") == "same"


def test_the_released_norm_against_this_one(tmp_path: Path) -> None:
    """The kept release and the norm as it is: what this round of work changed."""
    code, report, text = tools_diff(last_release(), "current", "--allow-breaking")
    assert code == 0, text
    added = {t["tool"] for t in report["tools"] if t["status"] == "added"}
    assert {"createApplication", "readApplication", "listApplications"} <= added
    # the tariff inquiry is no longer listed where a draft is kept: breaking for such agents
    inquiry = tool(report, "inquireTariff")["changes"]
    assert any(c["what"] == "norm flag changed" and c["breaking"] for c in inquiry)
    assert report["versionOk"] is True
    printed = subprocess.run(
        [sys.executable, "-m", "omds_ld.cli", "tools", "diff", last_release(), "current",
         "--allow-breaking", "--no-tokens", "--json", "-"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    only = json.loads(printed.stdout)  # stdout holds the JSON alone
    assert only["tools"] == [
        {**t, "tokens": {"before": None, "after": None}} for t in report["tools"]
    ]


def deprecate(document: Norm) -> None:
    raw = operation(document, "validateCalculation")
    raw["deprecated"] = True
    raw.setdefault("x-omds-ld", {})["replacedBy"] = "readCalculation"
    request = document["components"]["schemas"]["CalculationRequest"]
    request["properties"]["bc:basedOn"]["deprecated"] = True


def test_a_deprecated_operation_is_listed_marked_and_works(
    server: ExampleServer, tmp_path: Path
) -> None:
    before = current()
    deprecated = copy.deepcopy(before)
    deprecate(deprecated)
    deprecated["info"]["version"] = "0.3.0"
    path = write(tmp_path, "deprecated", deprecated)

    async def run() -> None:
        parameters = stdio_parameters(
            server, "pfefferminzia", tmp_path / "log.jsonl", ["--openapi", str(path)]
        )
        async with Client(parameters, mode="legacy") as client:
            listed = {t.name: t for t in (await client.list_tools()).tools}
            validate = listed["validateCalculation"]
            assert validate.description.startswith(
                "DEPRECATED: still served, removed by the norm's next major version. "
                "Use readCalculation instead.\n"
            )
            assert validate.title.endswith("(deprecated)")
            assert validate.meta["omds-ld/deprecated"] is True
            assert (
                "Deprecated fields (still admitted): body.bc:basedOn."
                in listed["createCalculation"].description
            )
            assert "DEPRECATED" not in listed["readCalculation"].description
            products = await client.call_tool("listProducts", {})
            case = await follow(client, step(products, "createCalculation"))
            with_vehicle = await follow(client, step(case, "createRiskObject"), SKODA)
            text = with_vehicle.content[0].text
            assert "Deprecated, still served: validateCalculation (use readCalculation)" in text
            offered = step(with_vehicle, "validateCalculation")
            assert offered["deprecated"] is True
            validated = await follow(client, offered)  # still works
            assert answer_of(validated)["validation"]["conforms"] is True
            assert answer_of(validated)["deprecated"] is True
            assert validated.content[0].text.splitlines()[1] == (
                "validateCalculation (use readCalculation) is deprecated: it works until the "
                "norm's next major version removes it"
            )

    asyncio.run(run())
    code, report, _ = tools_diff(write(tmp_path, "before", before), path)
    assert code == 0  # deprecating is no break
    found = tool(report, "validateCalculation")
    assert found["level"] == "minor" and found["changes"][0]["what"] == "deprecated"

    removed = copy.deepcopy(deprecated)
    for item in removed["paths"].values():
        if item.get("get", {}).get("operationId") == "validateCalculation":
            del item["get"]
    removed["info"]["version"] = "1.0.0"
    code, report, text = tools_diff(path, write(tmp_path, "removed", removed))
    assert code == 1
    found = tool(report, "validateCalculation")
    assert found["status"] == "removed" and found["breaking"]
    assert "tool removed: it was deprecated" in text
    assert report["versionOk"] is True  # a major version may remove it, and the diff says so


def test_two_running_servers_are_compared_as_their_clients_meet_them(
    server: ExampleServer, tmp_path: Path
) -> None:
    """An MCP server pinned to the release (over stdio) against the example server's (HTTP), in
    front of the same insurer: the versions come from tools/list's _meta."""
    pinned = " ".join(
        [sys.executable, "-m", "omds_ld.cli", "mcp", "--stdio", "--api", server.api("pfefferminzia"),
         "--name", "pfefferminzia", "--norm-version", "0.1.0", "--log-level", "warning",
         "--request-log", str(tmp_path / "log.jsonl")]
    )  # fmt: skip
    code, report, text = tools_diff(f"stdio:{pinned}", server.mcp("pfefferminzia"))
    assert code == 1  # the tariff inquiry is no longer listed where a draft is kept
    assert report["old"]["version"] == "0.1.0" and report["new"]["version"] == "0.2.0"
    assert tool(report, "inquireTariff")["status"] == "removed"
    assert tool(report, "createApplication")["status"] == "added"
    described = tool(report, "listProducts")["changes"]
    assert [c["what"] for c in described] == ["description changed"]
    assert report["tokens"]["before"] > 0 and report["tokens"]["after"] > 0
    assert "version 0.1.0 → 0.2.0 is a major step: as the rules say" in text


@pytest.mark.parametrize("insurer", ["pfefferminzia", "disrupto"])
def test_a_server_of_an_unchanged_norm_against_the_norm_is_unchanged(
    server: ExampleServer, insurer: str
) -> None:
    """The docs' example, ``tools diff URL current``: a draft insurer lists no inquiry tools,
    an insurer without a draft no draft tools; against the norm being worked on, the server is
    compared as it lists the norm's tools, and nothing is added or removed."""
    code, report, text = tools_diff(server.mcp(insurer), "current")
    assert code == 0, text
    assert {t["status"] for t in report["tools"]} == {"unchanged"}, [
        (t["tool"], t["status"]) for t in report["tools"] if t["status"] != "unchanged"
    ]


def test_a_release_keeps_the_norms_files_as_their_version_and_never_replaces_one(
    tmp_path: Path,
) -> None:
    import shutil
    from importlib import resources

    data = tmp_path / "data"
    shutil.copytree(Path(str(resources.files("omds_ld.norm") / "data")), data)
    document = yaml.safe_load((data / "openapi.yaml").read_text())
    document["info"]["version"] = "0.3.0"
    write(data, "openapi", document)
    releases = tmp_path / "releases"
    command = [sys.executable, "-m", "omds_ld.cli", "norm", "release", "--data", str(data),
               "--releases", str(releases)]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    kept = releases / "0.3.0"
    assert {p.name for p in kept.iterdir()} >= {"openapi.yaml", "shapes.ttl", "budgets.yaml"}
    assert (kept / "openapi.yaml").read_text() == (data / "openapi.yaml").read_text()
    again = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2
    assert "version 0.3.0 is released already" in again.stderr
    code, report, _ = tools_diff(kept / "openapi.yaml", "current")
    assert report["old"]["version"] == "0.3.0" and report["new"]["version"] == "0.2.0"
    assert code == 1 and report["versionOk"] is False  # back to 0.2.0: lower
