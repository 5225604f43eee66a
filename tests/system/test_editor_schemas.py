"""Editors validate input files with our schemas: the real yaml-language-server (what VS Code's YAML extension,
Neovim, Helix and Emacs run; tests/consumers, installed by .ci/setup.d/50-consumers.sh) driven over its stdio
Language Server Protocol, as an editor drives it. It finds the schema from a file's modeline, shows no error on
the built-in packs, flags a bad severity at its line, shows our errorMessage words and our descriptions on hover.
No mock: a node process, JSON-RPC over pipes, nothing on the network (the schema store is switched off).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.paths import ROOT

SERVER = ROOT / "tests" / "consumers" / "node_modules" / "yaml-language-server" / "bin" / "yaml-language-server"
SCHEMAS = ROOT / "auditor" / "schemas"
SETTINGS = {"validate": True, "hover": True, "schemaStore": {"enable": False}}


class Editor:
    """A minimal LSP client: open a document, wait for its diagnostics, ask for a hover."""

    def __init__(self) -> None:
        node = shutil.which("node")
        if node is None or not SERVER.is_file():
            pytest.fail("node and tests/consumers' yaml-language-server are needed (.ci/setup.d/50-consumers.sh)")
        self.proc = subprocess.Popen([node, str(SERVER), "--stdio"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next_id = 1
        self.request("initialize", {"processId": None, "rootUri": ROOT.as_uri(),
                                    "capabilities": {"workspace": {"configuration": True}}})
        self.notify("initialized", {})
        self.notify("workspace/didChangeConfiguration", {"settings": {"yaml": SETTINGS}})

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        length = 0
        while line := self.proc.stdout.readline().strip():
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if not length:
            raise EOFError("yaml-language-server closed its output")
        message: dict[str, Any] = json.loads(self.proc.stdout.read(length))
        if "method" in message and "id" in message:  # a request from the server: answer it as an editor does
            items = message.get("params", {}).get("items", [])
            result = [SETTINGS for _ in items] if message["method"] == "workspace/configuration" else None
            self.send({"id": message["id"], "result": result})
        return message

    def until(self, wanted: Any, timeout: float = 60) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self.receive()
            if wanted(message):
                return message
        raise TimeoutError("no answer from yaml-language-server")

    def request(self, method: str, params: Any) -> Any:
        ident, self.next_id = self.next_id, self.next_id + 1
        self.send({"id": ident, "method": method, "params": params})
        return self.until(lambda m: m.get("id") == ident and "method" not in m).get("result")

    def diagnostics(self, path: Path, text: str) -> list[dict[str, Any]]:
        """Open `text` as the document at `path` (never written) and return what the server reports on it."""
        uri = path.as_uri()
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1,
                                                              "text": text}})
        message = self.until(lambda m: m.get("method") == "textDocument/publishDiagnostics"
                             and m["params"]["uri"] == uri)
        return list(message["params"]["diagnostics"])

    def hover(self, path: Path, line: int, character: int) -> str:
        result = self.request("textDocument/hover", {"textDocument": {"uri": path.as_uri()},
                                                     "position": {"line": line, "character": character}})
        contents = (result or {}).get("contents", "")
        return contents.get("value", "") if isinstance(contents, dict) else str(contents)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)


@pytest.fixture(scope="module")
def editor() -> Iterator[Editor]:
    client = Editor()
    yield client
    client.close()


def test_the_builtin_packs_show_no_error_in_an_editor(editor: Editor) -> None:
    for pack in sorted((ROOT / "rules").glob("*.yaml")):
        text = pack.read_text()
        assert editor.diagnostics(pack, text) == [], pack.name
        # and the modeline did bring the schema: the severity key shows its description
        line = next(i for i, t in enumerate(text.splitlines()) if t.strip().startswith("severity:"))
        assert "critical, high, medium, low or info" in editor.hover(pack, line, 6), pack.name


def test_an_editor_flags_a_bad_severity_at_its_line_from_our_schema(editor: Editor) -> None:
    text = (ROOT / "rules" / "cgroups.yaml").read_text()
    line = next(i for i, t in enumerate(text.splitlines()) if t.strip().startswith("severity:"))
    broken = text.replace(text.splitlines()[line], "    severity: hgh", 1)
    [diagnostic] = editor.diagnostics(ROOT / "rules" / "zz-unsaved.yaml", broken)
    assert diagnostic["range"]["start"]["line"] == line
    assert '"critical", "high", "medium", "low", "info"' in diagnostic["message"]
    assert diagnostic["source"] == "yaml-schema: ami-auditor rule pack"


def test_an_editor_shows_our_words_and_descriptions(editor: Editor, tmp_path: Path) -> None:
    path = tmp_path / "fleet.yaml"
    text = (f"# yaml-language-server: $schema={SCHEMAS / 'inventory.schema.json'}\n"
            "hosts:\n  - name: b 1\n    target: ssh://b1\n    ssh:\n      port: '22'\n")
    diagnostics = sorted(editor.diagnostics(path, text), key=lambda d: d["range"]["start"]["line"])
    # the schema's errorMessage (on type and pattern errors), the words the CLI says after the node's name
    assert [(d["range"]["start"]["line"], d["message"]) for d in diagnostics] == [
        (2, "must be a non-empty string without whitespace or control characters"),
        (5, "must be an integer 1-65535")]
    assert "SSH port" in editor.hover(path, 5, 8)
    assert "unique in the inventory" in editor.hover(path, 2, 6)
