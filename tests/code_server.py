"""VS Code for the end-to-end tests: code-server (VS Code in a browser, from the npm registry), installed with
nothing but the registries, started on loopback with a private profile.

code-server's own install script does not work offline: its postinstall refuses to run as root, and VS Code's
`@vscode/ripgrep` downloads its binary from GitHub. So the install is done here step by step, as its
postinstall.sh would do it, with the downloads left out: npm installs every package with scripts off, the system's
ripgrep is put where `@vscode/ripgrep` looks, and then the native modules are built (npm rebuild) against the
Node.js headers installed with Node.js. The result is kept in the user cache folder by version, Node.js major
and machine, so only the first run pays for it (about two minutes on two cores); a clean run installs it afresh.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import platformdirs

VERSION = "4.100.3"  # the last code-server that runs on Node.js 20 (later ones need Node.js 24)
NODE_MAJOR = 20
# What building code-server's native modules needs from the system, and the Debian packages that provide it.
SYSTEM_PACKAGES = "chromium ripgrep libkrb5-dev libxkbfile-dev libsecret-1-dev libx11-dev"
INSTALL_TIMEOUT_S = 1200
START_TIMEOUT_S = 60


class Missing(Exception):
    """Something the browser tests need is not on this machine; the message says what to install."""


def _run(command: list[str], cwd: Path, env: dict[str, str], what: str) -> None:
    completed = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(
            f"installing code-server: {what} failed ({' '.join(command)} exited {completed.returncode})\n"
            f"{completed.stdout[-3000:]}\n{completed.stderr[-6000:]}"
        )


def _node() -> tuple[Path, int]:
    node = shutil.which("node")
    if node is None or shutil.which("npm") is None:
        raise Missing(f"Node.js {NODE_MAJOR} with npm is needed for the VS Code tests")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, check=True).stdout.strip()
    match = re.match(r"v(\d+)\.", version)
    if match is None or int(match.group(1)) != NODE_MAJOR:
        raise Missing(f"code-server {VERSION} runs on Node.js {NODE_MAJOR}; this machine has {version}")
    return Path(node).resolve(), int(match.group(1))


def install_folder() -> Path:
    machine = f"{platform.system().lower()}-{platform.machine().lower()}"
    root = Path(platformdirs.user_cache_dir("margin-tests"))
    return root / f"code-server-{VERSION}-node{NODE_MAJOR}-{machine}"


def _environment(node: Path) -> dict[str, str]:
    env = {
        **os.environ,
        "npm_config_audit": "false",
        "npm_config_fund": "false",
        "npm_config_update_notifier": "false",
        # node-pty's install script runs `npx node-gyp`, which otherwise stops to ask before fetching node-gyp
        # from the registry.
        "npm_config_yes": "true",
        # Compile every native module here: prebuild-install and node-pre-gyp would first try to download a
        # prebuilt binary from GitHub.
        "npm_config_build_from_source": "true",
    }
    # node-gyp builds against the headers that came with Node.js (Debian and NodeSource install them); without
    # them it would download them from nodejs.org.
    prefix = node.parent.parent
    if not (prefix / "include" / "node" / "node.h").is_file():
        raise Missing(
            f"building code-server needs Node.js's C headers in {prefix / 'include' / 'node'} (Debian: libnode-dev, "
            "or Node.js from NodeSource, which includes them)"
        )
    env["npm_config_nodedir"] = str(prefix)
    return env


def _check_system() -> None:
    missing = [name for name in ("rg", "c++", "make") if shutil.which(name) is None]
    if not Path("/usr/include/gssapi/gssapi.h").exists() and not Path("/usr/include/krb5.h").exists():
        missing.append("the Kerberos headers")
    if missing:
        raise Missing(
            f"building code-server needs {', '.join(missing)}: on Debian or Ubuntu, "
            f"apt-get install build-essential {SYSTEM_PACKAGES}"
        )


def _install(folder: Path, node: Path) -> None:
    env = _environment(node)
    (folder / "package.json").write_text(json.dumps({"private": True}), encoding="utf-8")
    _run(["npm", "install", "--ignore-scripts", f"code-server@{VERSION}"], folder, env, "npm install")
    _run(["npm", "rebuild", "argon2"], folder, env, "building argon2")
    vscode = folder / "node_modules" / "code-server" / "lib" / "vscode"
    _run(["npm", "install", "--omit=dev", "--ignore-scripts"], vscode, env, "VS Code's packages")
    ripgrep = vscode / "node_modules" / "@vscode" / "ripgrep" / "bin"
    ripgrep.mkdir(parents=True, exist_ok=True)
    rg = shutil.which("rg")
    assert rg is not None  # _check_system
    (ripgrep / "rg").symlink_to(Path(rg).resolve())  # its postinstall skips the download when bin/ exists
    _run(["npm", "rebuild"], vscode, env, "VS Code's native modules")
    # What code-server's postinstall.sh does after its npm install.
    (vscode / "node_modules.asar").symlink_to("node_modules")
    (vscode / "bin" / "remote-cli" / "code-server").symlink_to("code-linux.sh")
    (vscode / "bin" / "helpers" / "browser.sh").symlink_to("browser-linux.sh")
    _run(["npm", "install", "--omit=dev"], vscode / "extensions", env, "the built-in extensions' packages")


def ensure_installed() -> Path:
    """The code-server launcher, installed first if this machine has none for this version."""
    node, _ = _node()
    folder = install_folder()
    launcher = folder / "node_modules" / ".bin" / "code-server"
    ready = folder / ".installed"
    if ready.is_file():
        return launcher
    _check_system()
    _environment(node)  # Missing now, before anything is installed, if Node.js's headers are not there
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be installing it now
        if ready.is_file():
            return launcher
        staging = folder.parent / f"{folder.name}.partial"
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(folder, ignore_errors=True)
        staging.mkdir()
        _install(staging, node)
        staging.rename(folder)  # npm's links are relative: the installation works where it is moved to
        ready.write_text(VERSION, encoding="utf-8")
    return launcher


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found is not None:
            return found
    raise Missing(f"a Chromium browser is needed for the browser tests: apt-get install {SYSTEM_PACKAGES}")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class CodeServer:
    url: str
    process: subprocess.Popen[bytes]
    log: Path
    user_data: Path

    def margin_log(self) -> str:
        """What margin's output channel shows: the extension's lines and the server's log."""
        return "\n".join(
            path.read_text(errors="replace")
            for path in sorted((self.user_data / "logs").rglob("*-margin.log"))
        )

    def logs(self) -> str:
        """code-server's own output and VS Code's logs (the extension host's and margin's output channel)."""
        parts = [f"== {self.log.name}\n{self.log.read_text(errors='replace')[-6000:]}"]
        for path in sorted((self.user_data / "logs").rglob("*.log")):
            if any(word in path.name for word in ("exthost", "margin", "remoteagent", "output")):
                parts.append(
                    f"== {path.relative_to(self.user_data)}\n{path.read_text(errors='replace')[-6000:]}"
                )
        return "\n".join(parts)


@contextlib.contextmanager
def running(launcher: Path, home: Path, settings: dict[str, object], extension: Path) -> Iterator[CodeServer]:
    """code-server on a free loopback port with a profile under `home` (user settings, extensions, logs and XDG
    folders), `extension` (a .vsix) installed, no authentication, nothing phoning home."""
    user_data, extensions = home / "user-data", home / "extensions"
    (user_data / "User").mkdir(parents=True, exist_ok=True)
    (user_data / "User" / "settings.json").write_text(json.dumps(settings, indent=2), encoding="utf-8")
    config = home / "config.yaml"
    config.write_text("auth: none\ncert: false\n", encoding="utf-8")
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(home / "xdg-config"),
        "XDG_DATA_HOME": str(home / "xdg-data"),
        "XDG_CACHE_HOME": str(home / "xdg-cache"),
        "VSCODE_PROXY_URI": "",
    }
    common = ["--config", str(config), "--user-data-dir", str(user_data), "--extensions-dir", str(extensions)]
    _run(
        [str(launcher), *common, "--install-extension", str(extension)], home, env, "installing the extension"
    )
    port = free_port()
    log = home / "code-server.log"
    with open(log, "wb") as output:
        process = subprocess.Popen(
            [
                str(launcher),
                *common,
                "--bind-addr",
                f"127.0.0.1:{port}",
                "--auth",
                "none",
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
            ],
            cwd=home,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = CodeServer(f"http://127.0.0.1:{port}", process, log, user_data)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "HTTP server listening" not in log.read_text(errors="replace"):
            if process.poll() is not None:
                raise RuntimeError(
                    f"code-server exited {process.returncode} while starting:\n{server.logs()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"code-server did not start in {START_TIMEOUT_S} s:\n{server.logs()}")
            time.sleep(0.1)
        yield server
    finally:
        # code-server, its extension host and margin's server are one process group: stop them all, and kill
        # whatever did not stop (a child may outlive the leader).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
