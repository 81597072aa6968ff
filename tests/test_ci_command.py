"""The README's test command is written in three places: the README, `.ci/run` and
`tox -e cpu` (`tox -e cpu-all`: the same with `--vendor all` for its selection). A selection
changed in one of them alone would make CI check other profiles than the README says."""
import configparser
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_test_command() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Run the tests\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    lines = [ln for ln in block.group(1).splitlines() if ln.strip()]
    assert len(lines) == 1, f"the README's test command block holds {len(lines)} lines"
    return shlex.split(lines[0])


def ci_run_command() -> list[str]:
    lines = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines()
             if ln.startswith("python -m pytest")]
    assert len(lines) == 1, f".ci/run runs pytest {len(lines)} times"
    return shlex.split(lines[0])


def tox_command(env: str) -> list[str]:
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(ROOT / "tox.ini")
    words = shlex.split(tox[f"testenv:{env}"]["commands"])
    assert words[-1] == "{posargs}", f"tox -e {env} does not pass its arguments on"
    return ["python", "-m"] + words[:-1]


def without_selection(words: list[str]) -> list[str]:
    out = []
    for word in words:
        if out and out[-1] == "--vendor":
            out.pop()
            continue
        out.append(word)
    return out


def test_ci_and_tox_cpu_run_the_readme_test_command():
    readme = readme_test_command()
    assert ci_run_command() == readme
    assert tox_command("cpu") == readme


def test_tox_cpu_all_is_the_same_command_for_every_profile():
    readme = readme_test_command()
    assert "--vendor" in readme
    assert tox_command("cpu-all") == without_selection(readme) + ["--vendor", "all"]
