"""Finding the engine and its token as the CLI does (src/cli/client.rs,
src/cli/datadir.rs):

- the URL: ``url=``, else ``$WEIR_ENGINE``, else the data directory's
  ``engine.json`` (with a replicated engine's members' URLs);
- the data directory: ``data=``, else ``$WEIR_DATA_DIR``, else ``./.weir``,
  else the one ``weir run``/``weir serve`` recorded for this folder
  (``$XDG_STATE_HOME/weir/data-dirs.json``);
- the token: ``token=``, else ``token_file=``, else ``$WEIR_TOKEN``, else
  ``DATA/token``;
- the CA: ``ca=``, else ``$WEIR_CA``.
"""

import json
import os
from typing import List, NamedTuple, Optional, Sequence, Union
from urllib.parse import urlsplit

from .errors import ConfigError

ENV_ENGINE = "WEIR_ENGINE"
ENV_TOKEN = "WEIR_TOKEN"
ENV_CA = "WEIR_CA"
ENV_DATA_DIR = "WEIR_DATA_DIR"
TOKEN_FILE_BYTES_MAX = 4096

PathLike = Union[str, "os.PathLike[str]"]


class Found(NamedTuple):
    urls: List[str]
    token: str
    ca: Optional[str]
    data: Optional[str]


def _is_data(d: str) -> bool:
    return os.path.isdir(os.path.join(d, "sled")) or os.path.isfile(os.path.join(d, "engine.json"))


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _engine_file(d: str) -> Optional[dict]:
    try:
        with open(os.path.join(d, "engine.json"), encoding="utf-8") as f:
            info = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ConfigError(f"{os.path.join(d, 'engine.json')}: not an engine file: {e}") from None
    if not isinstance(info, dict) or "url" not in info:
        raise ConfigError(f"{os.path.join(d, 'engine.json')}: not an engine file")
    # A member of a replicated engine that died leaves its peers' URLs.
    if _pid_alive(int(info.get("pid", 0))) or info.get("members"):
        return info
    return None


def data_dir(explicit: Optional[PathLike]) -> Optional[str]:
    """The data directory a client reads, or None when none is found."""
    if explicit is not None:
        d = os.fspath(explicit)
        if not _is_data(d):
            raise ConfigError(f"data={d}: not a weir data directory (no store in it); "
                              "run `weir run` or `weir serve` with it first")
        return os.path.abspath(d)
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        if not _is_data(env):
            raise ConfigError(f"${ENV_DATA_DIR}={env}: not a weir data directory (no store in it)")
        return os.path.abspath(env)
    if _is_data(".weir"):
        return os.path.abspath(".weir")
    state = os.environ.get("XDG_STATE_HOME")
    if not (state and os.path.isabs(state)):
        home = os.environ.get("HOME")
        state = os.path.join(home, ".local", "state") if home else None
    if state:
        try:
            with open(os.path.join(state, "weir", "data-dirs.json"), encoding="utf-8") as f:
                used = json.load(f).get("used", {}).get(os.getcwd(), [])
        except (OSError, ValueError, AttributeError):
            used = []
        present = [u["data"] for u in used if isinstance(u, dict) and _is_data(u.get("data", ""))]
        running = [d for d in present if _engine_file(d)]
        if len(running) == 1:
            return running[0]
        if len(present) == 1:
            return present[0]
    return None


def read_token_file(path: PathLike) -> str:
    p = os.fspath(path)
    try:
        if os.path.getsize(p) > TOKEN_FILE_BYTES_MAX:
            raise ConfigError(f"token file {p}: too large to be a token (at most {TOKEN_FILE_BYTES_MAX} bytes)")
        with open(p, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ConfigError(f"token file {p}: {e.strerror or e}") from None
    token = lines[0].strip() if lines else ""
    if len(token) < 16:
        raise ConfigError(f"token file {p}: the token must be at least 16 characters")
    return token


def check_url(u: str) -> str:
    parts = urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"engine URL {u!r}: not an http(s) URL with a host")
    try:
        parts.port
    except ValueError as e:
        raise ConfigError(f"engine URL {u!r}: {e}") from None
    return u.rstrip("/")


def find(url: Union[None, str, Sequence[str]], token: Optional[str],
         token_file: Optional[PathLike], ca: Optional[PathLike],
         data: Optional[PathLike]) -> Found:
    urls: List[str] = []
    if isinstance(url, str):
        urls = [u.strip() for u in url.split(",") if u.strip()]
    elif url is not None:
        urls = list(url)
    elif os.environ.get(ENV_ENGINE):
        urls = [u.strip() for u in os.environ[ENV_ENGINE].split(",") if u.strip()]
    d: Optional[str] = None
    if urls:
        try:
            d = data_dir(data)
        except ConfigError:
            if data is not None:
                raise
    else:
        d = data_dir(data)
        if d is None:
            raise ConfigError(
                "no engine found: pass url= (or set $WEIR_ENGINE), or data= the engine's data "
                f"directory (or set ${ENV_DATA_DIR}, or run from a folder with ./.weir)")
        info = _engine_file(d)
        if info is None:
            raise ConfigError(f"no engine is running on {d}; start one with "
                              f"`weir serve PATH --data {d}` (or `weir run PATH`), then try again")
        urls = [info["url"]] + [m for m in info.get("members", []) if m != info["url"]]
    urls = [check_url(u) for u in urls]
    if token is None:
        if token_file is not None:
            token = read_token_file(token_file)
        elif os.environ.get(ENV_TOKEN):
            token = os.environ[ENV_TOKEN]
        elif d is not None:
            token = read_token_file(os.path.join(d, "token"))
        else:
            raise ConfigError(f"no token: pass token= or token_file=, set ${ENV_TOKEN}, "
                              "or data= the engine's data directory (its token is DATA/token)")
    if ca is None and os.environ.get(ENV_CA):
        ca = os.environ[ENV_CA]
    return Found(urls, token, os.fspath(ca) if ca is not None else None, d)
