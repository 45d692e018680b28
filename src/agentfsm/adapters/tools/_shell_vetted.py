"""Vetted option tables of programs that run other programs: git, package managers, test
runners and build tools (see :mod:`agentfsm.adapters.tools._shell_tables`).

An option that is not listed is refused, and so is every abbreviation of a listed one.
What is left out on purpose: options that run a program or code given on the command
line (``git grep -O``, ``git -c``, ``rebase -x``, ``clone -u``, ``--upload-pack``,
``--exec``, ``difftool``, ``go build -toolexec``, ``cargo --config``, ``npm exec``),
options that hand the terminal to an editor or a pager, and ``git config`` writes.
"""

from __future__ import annotations

import re

from ._shell_tables import FIND, MAKE, TAR, Spec

__all__ = ["VETTED"]

_DIFF_FLAGS = (
    "-p -u --patch -s --no-patch --raw --patch-with-raw --patch-with-stat --stat "
    "--compact-summary --numstat --shortstat --dirstat --summary --name-only --name-status "
    "--check -z --color --no-color --color-words --word-diff --full-index --binary --no-abbrev "
    "-R --text -a --ignore-all-space -w -b --ignore-space-change --ignore-blank-lines "
    "--ignore-cr-at-eol --ignore-space-at-eol --minimal --patience --histogram --no-renames "
    "-M -B --find-renames --find-copies --find-copies-harder --cached --staged --merge-base "
    "--exit-code --quiet --no-ext-diff --no-textconv --submodule --indent-heuristic "
    "--no-indent-heuristic --relative --no-relative --function-context -W --no-prefix "
    "--default-prefix --irreversible-delete -D --ita-invisible-in-index --no-color-moved"
)
_DIFF_VALUES = (
    "-U --unified --inter-hunk-context --diff-filter -S -G --src-prefix --dst-prefix "
    "--line-prefix --stat-width --stat-count --anchored --diff-algorithm --word-diff-regex "
    "--ws-error-highlight -l"
)
_DIFF_OPTIONAL = (
    "--color --color-moved --color-moved-ws --word-diff --abbrev --stat --dirstat --relative "
    "--submodule --find-renames --find-copies --ignore-submodules --pickaxe-regex --pickaxe-all"
)
_LOG_FLAGS = (
    "--oneline --graph --no-decorate --all --reverse --no-merges --merges --first-parent "
    "--follow --abbrev-commit --no-abbrev-commit -i --regexp-ignore-case -E --extended-regexp "
    "-F --fixed-strings -P --perl-regexp --all-match --invert-grep --left-right --cherry-pick "
    "--cherry-mark --cherry --boundary --topo-order --date-order --author-date-order --source "
    "--simplify-by-decoration --ancestry-path --full-history --walk-reflogs -g --no-notes "
    "--mailmap --use-mailmap --no-mailmap --log-size --parents --children --cc -c -m "
    "--remerge-diff --no-walk --do-walk --count --objects --relative-date --full-diff "
    "--not --dense --sparse --show-linear-break --no-expand-tabs --expand-tabs --show-pulls"
)
_LOG_VALUES = (
    "-n --max-count --skip --date --format --author --committer --grep --since --until "
    "--after --before -L --diff-merges --max-parents --min-parents --since-as-filter "
    "--exclude --glob --encoding"
)
_LOG_OPTIONAL = "--decorate --pretty --branches --tags --remotes --notes --show-notes"


def _git_log(extra: str = "", values: str = "") -> Spec:
    return Spec(
        f"{_DIFF_FLAGS} {_LOG_FLAGS} {extra}",
        f"{_DIFF_VALUES} {_LOG_VALUES} {values}",
        f"{_DIFF_OPTIONAL} {_LOG_OPTIONAL}",
        numeric=True,
    )


_LOG = _git_log()
_DIFF = Spec(_DIFF_FLAGS + " --no-index", _DIFF_VALUES, _DIFF_OPTIONAL)

_CONFIG_READS = {"--get", "--get-all", "--get-regexp", "--list", "-l"}


def _config_reads(seen: set[str], operands: list[str]) -> str | None:
    """``git config`` only reads: ``--get``/``--list``…, or one name and no value."""
    if seen & _CONFIG_READS or len(operands) == 1:
        return None
    return "git config without --get, --list or a single name: not a form the rules can vet"


GIT_SUBCOMMANDS: dict[str, Spec] = {
    "status": Spec(
        "-s --short -b --branch --long -v --verbose -z --show-stash --ahead-behind "
        "--no-ahead-behind --renames --no-renames --no-column",
        "",
        "--porcelain -u --untracked-files --ignored --ignore-submodules --column --find-renames",
    ),
    "log": _LOG,
    "show": _git_log(),
    "whatchanged": _LOG,
    "rev-list": _LOG,
    "reflog": Spec(f"{_DIFF_FLAGS} {_LOG_FLAGS}", f"{_DIFF_VALUES} {_LOG_VALUES}", numeric=True),
    "diff": _DIFF,
    "shortlog": Spec(
        "-s -n -e -c --summary --numbered --email --committer --all",
        "--since --until --after --before --group --format -w",
    ),
    "branch": Spec(
        "-a --all -r --remotes -v -vv --verbose --list -l --show-current --no-contains "
        "--no-merged -d -D --delete -m -M --move -c -C --copy -f --force --unset-upstream "
        "--no-track --no-color -i --ignore-case -q --quiet --no-column --create-reflog",
        "--sort --format --points-at -u --set-upstream-to",
        "--contains --merged --column --color --abbrev -t --track",
    ),
    "tag": Spec(
        "-l --list -a --annotate -d --delete -f --force --no-contains --no-merged "
        "--ignore-case -i --no-column",
        "-m --message -F --file --sort --format --points-at",
        "-n --contains --merged --column --color",
    ),
    "grep": Spec(
        "-n --line-number -i --ignore-case -w --word-regexp -v --invert-match -l "
        "--files-with-matches --name-only -L --files-without-match -c --count -h -H "
        "--full-name -E --extended-regexp -F --fixed-strings -G --basic-regexp -P "
        "--perl-regexp -I --cached --untracked --no-index --no-exclude-standard "
        "--exclude-standard -r --recursive --no-recursive --heading --break -p "
        "--show-function -W --function-context -z --null -o --only-matching -q --quiet "
        "--all-match --column --no-color -a --text --no-textconv --and --or --not "
        "--recurse-submodules",
        "-e -f -A -B -C --context --after-context --before-context --max-depth -m "
        "--max-count --threads",
        "--color",
        numeric=True,
    ),
    "rev-parse": Spec(
        "--show-toplevel --git-dir --is-inside-work-tree --is-inside-git-dir --is-bare-repository "
        "--verify -q --quiet --symbolic --symbolic-full-name --show-prefix --show-cdup "
        "--absolute-git-dir --git-common-dir --all --local-env-vars "
        "--show-superproject-working-tree",
        "--since --until --after --before",
        "--short --abbrev-ref --branches --tags --remotes --default",
    ),
    "ls-files": Spec(
        "-c --cached -m --modified -o --others -d --deleted -i --ignored -s --stage -u "
        "--unmerged -k --killed -z --exclude-standard --full-name --error-unmatch -t -v -f "
        "--directory --no-empty-directory --recurse-submodules --eol --sparse --deduplicate",
        "-x --exclude -X --exclude-from --exclude-per-directory --format --with-tree",
        "--abbrev",
    ),
    "ls-tree": Spec(
        "-r -d -t -l --long --name-only --name-status --full-name --full-tree -z --object-only",
        "--format",
        "--abbrev",
    ),
    "cat-file": Spec("-t -s -p -e --allow-unknown-type"),
    "show-ref": Spec(
        "--heads --tags --head -d --dereference --verify -q --quiet --exists --branches",
        "",
        "-s --hash --abbrev",
    ),
    "for-each-ref": Spec(
        "--shell --perl --python --tcl --ignore-case --omit-empty --no-contains --no-merged",
        "--format --sort --count --points-at --exclude",
        "--contains --merged",
    ),
    "merge-base": Spec("-a --all --octopus --is-ancestor --independent --fork-point"),
    "describe": Spec(
        "--tags --all --always --long --exact-match --contains --first-parent --debug",
        "--match --exclude --candidates",
        "--abbrev --dirty --broken",
    ),
    "blame": Spec(
        "-w -M -C -e -l -s -t -p -b -f -n -c --porcelain --line-porcelain --root --show-stats "
        "--incremental --show-name --show-number --show-email --no-textconv --minimal "
        "--progress --no-progress --score-debug",
        "-L --date --ignore-rev --ignore-revs-file -S --contents --since --reverse",
        "--abbrev --color-lines --color-by-age",
    ),
    "config": Spec(
        "--get --get-all --get-regexp --list -l --show-origin --show-scope --local --global "
        "--system --worktree --name-only -z --null --bool --int --path --bool-or-int --expiry-date",
        "--type --default --file -f --blob",
        complete=_config_reads,
    ),
    "add": Spec(
        "-A --all -u --update -n --dry-run -v --verbose -f --force -N --intent-to-add "
        "--ignore-errors --ignore-missing --no-all --ignore-removal --sparse --refresh",
        "--chmod --pathspec-from-file",
    ),
    "commit": Spec(
        "-a --all --amend --no-edit -s --signoff --no-signoff -q --quiet --allow-empty "
        "--allow-empty-message --no-verify -n -v --verbose --dry-run --short --porcelain "
        "--reset-author --only -o --include -i --no-status --status --no-gpg-sign -z --null "
        "--branch",
        "-m --message -F --file --author --date -C --reuse-message --fixup --squash "
        "--trailer --pathspec-from-file",
        "--untracked-files -u --cleanup",
    ),
    "checkout": Spec(
        "-f --force -q --quiet --detach --no-track --ours --theirs -m --merge --no-guess "
        "--guess --overlay --no-overlay --ignore-skip-worktree-bits --progress --no-progress",
        "-b -B --orphan --pathspec-from-file",
        "-t --track --conflict",
    ),
    "switch": Spec(
        "-d --detach --discard-changes -f --force --guess --no-guess -q --quiet --no-track "
        "-m --merge --progress --no-progress",
        "-c -C --create --force-create --orphan",
        "-t --track --conflict",
    ),
    "restore": Spec(
        "-S --staged -W --worktree --ours --theirs -q --quiet -m --merge --overlay "
        "--no-overlay --ignore-unmerged --progress --no-progress",
        "-s --source --pathspec-from-file",
        "--conflict",
    ),
    "reset": Spec(
        "--soft --hard --mixed --keep --merge -q --quiet --no-refresh --refresh",
        "--pathspec-from-file",
    ),
    "rm": Spec(
        "-f --force -r --cached -n --dry-run -q --quiet --ignore-unmatch --sparse",
        "--pathspec-from-file",
    ),
    "mv": Spec("-f --force -k -n --dry-run -v --verbose"),
    "clean": Spec("-n --dry-run -f --force -d -x -X -q --quiet", "-e --exclude"),
    "stash": Spec(
        f"{_DIFF_FLAGS} -u --include-untracked -a --all -k --keep-index --no-keep-index -q "
        "--quiet --staged -S --index --only-untracked",
        f"{_DIFF_VALUES} -m --message --pathspec-from-file",
        _DIFF_OPTIONAL,
    ),
    "merge": Spec(
        "--no-ff --ff --ff-only --squash --no-squash --no-commit --commit --abort --continue "
        "--quit -q --quiet -v --verbose --no-edit --allow-unrelated-histories --stat -n "
        "--no-stat --no-verify --no-gpg-sign --no-log --autostash --no-autostash",
        "-m -F --file -X --strategy-option --into-name",
        "--log --signoff --no-signoff",
    ),
    "rebase": Spec(
        "--continue --abort --skip --quit --autostash --no-autostash -q --quiet -v --verbose "
        "--keep-empty --no-keep-empty --root --update-refs --no-update-refs --no-verify "
        "--fork-point --no-fork-point --ignore-whitespace --committer-date-is-author-date "
        "--reset-author-date --no-autosquash --autosquash --stat -n --no-stat "
        "--reapply-cherry-picks --no-reapply-cherry-picks --apply --merge -m --no-gpg-sign",
        "--onto -X --strategy-option -C --whitespace",
        "--rebase-merges --empty",
    ),
    "cherry-pick": Spec(
        "--continue --abort --skip --quit -n --no-commit -x -s --signoff --ff --allow-empty "
        "--allow-empty-message --keep-redundant-commits -q --no-gpg-sign",
        "-m --mainline -X --strategy-option",
        "--empty",
    ),
    "revert": Spec(
        "--continue --abort --skip --quit -n --no-commit -s --signoff --no-edit "
        "--no-gpg-sign --reference",
        "-m --mainline -X --strategy-option",
    ),
    "init": Spec("-q --quiet --bare", "-b --initial-branch --object-format", "--shared"),
    "clone": Spec(
        "-q --quiet -v --verbose -n --no-checkout --bare --mirror --single-branch "
        "--no-single-branch --no-tags --tags --shallow-submodules --no-shallow-submodules "
        "--no-hardlinks -l --local -s --shared --progress --no-progress --sparse "
        "--also-filter-submodules --remote-submodules --no-remote-submodules --dissociate",
        "-b --branch -o --origin --depth --shallow-since --shallow-exclude --filter "
        "--reference --reference-if-able --revision --bundle-uri",
        "--recurse-submodules",
    ),
    "fetch": Spec(
        "--all -p --prune -P --prune-tags -t --tags -n --no-tags -q --quiet -v --verbose "
        "--dry-run --unshallow --update-shallow -f --force -k --keep --multiple "
        "--no-recurse-submodules --progress --no-progress --append -a --atomic "
        "--no-write-fetch-head --write-fetch-head --set-upstream --auto-gc --no-auto-gc",
        "--depth --deepen --shallow-since --shallow-exclude --filter -j --jobs",
        "--recurse-submodules",
    ),
    "pull": Spec(
        "--ff-only --ff --no-ff --no-rebase --squash --no-squash --commit --no-commit "
        "--no-edit -q --quiet -v --verbose --all --tags -t -p --prune --autostash "
        "--no-autostash --allow-unrelated-histories --unshallow --no-verify --stat -n --no-stat",
        "--depth -X --strategy-option",
        "--rebase -r --recurse-submodules",
    ),
    "push": Spec(
        "-u --set-upstream -f --force --tags --follow-tags --no-follow-tags -d --delete "
        "-n --dry-run -q --quiet -v --verbose --all --branches --mirror --prune --no-verify "
        "--atomic --no-atomic --porcelain --progress --no-progress --force-if-includes",
        "-o --push-option",
        "--force-with-lease --recurse-submodules --no-recurse-submodules",
    ),
    "ls-remote": Spec(
        "--heads --tags --branches -h -t -b --refs -q --quiet --exit-code --get-url --symref",
        "--sort -o --server-option",
    ),
    "remote": Spec("-v --verbose", "-t -m", "--mirror"),
    "worktree": Spec(
        "-f --force --detach --checkout --no-checkout -q --quiet --porcelain -v --verbose "
        "--expire -z --lock --guess-remote --no-guess-remote --orphan",
        "-b -B --reason",
        "--track --no-track",
    ),
    "format-patch": Spec(
        f"{_DIFF_FLAGS} --stdout -n --numbered -N --no-numbered --cover-letter "
        "--no-cover-letter -k --keep-subject --signoff -s --zero-commit --no-signature "
        "--root -q --quiet --no-thread --no-binary --progress",
        f"{_DIFF_VALUES} -o --output-directory --subject-prefix -v --reroll-count "
        "--start-number --suffix --base --from --to --cc --in-reply-to",
        f"{_DIFF_OPTIONAL} --thread --rfc",
        numeric=True,
    ),
    "apply": Spec(
        "--check --stat --numstat --summary --index --cached --intent-to-add -3 --3way -R "
        "--reverse --reject -v --verbose -q --quiet --unidiff-zero --apply --no-add "
        "--allow-empty --recount --inaccurate-eof --ignore-space-change --ignore-whitespace",
        "-p -C --whitespace --exclude --include --directory",
    ),
    "version": Spec("--build-options"),
}
"""git subcommands and their options. Left out: ``difftool``, ``mergetool``, ``bisect``
(``bisect run``), ``submodule`` (``foreach``), ``archive`` (``--exec``), ``filter-branch``,
``help`` (opens a browser), ``config`` writes, ``send-email``, ``daemon`` and every other
subcommand that runs a program it is given."""

GIT = Spec(
    "--no-pager -P --bare --no-replace-objects --literal-pathspecs --glob-pathspecs "
    "--noglob-pathspecs --icase-pathspecs --no-optional-locks --no-advice --version -v -h",
    "-C --git-dir --work-tree --namespace",
    subcommands=GIT_SUBCOMMANDS,
    info="--version -v -h",
)
"""``git``: refused are ``-c``, ``--config-env``, ``--exec-path``, ``-p``/``--paginate``,
``--help`` (it runs ``man``) and every subcommand not in :data:`GIT_SUBCOMMANDS`."""


def _script_word(word: str) -> str | None:
    if re.fullmatch(r"[\w@%+=:,./-]*", word):
        return None
    return f"{word}: passed on to a script's shell, and only plain words are vetted"


_SCRIPT_ARGS = Spec(anything=True, check=_script_word)
_RUN = Spec("--if-present --silent -s", "-w --workspace", check=_script_word, rest=_SCRIPT_ARGS)
_NPM_GLOBAL = (
    "--silent -s -q --quiet --workspaces --ws --if-present --version -v --help -h",
    "-w --workspace --prefix",
)
_INSTALL = Spec(
    "-D --save-dev -S --save --no-save -E --save-exact -P --save-prod --production "
    "--ignore-scripts --legacy-peer-deps --no-audit --no-fund --prefer-offline --offline "
    "--frozen-lockfile --immutable --prod --dev",
    "--omit --include",
)


def _npm(*extra: str) -> dict[str, Spec]:
    table = dict.fromkeys(("run", "run-script", "test", "t", "tst", *extra), _RUN)
    table.update(dict.fromkeys(("install", "i", "ci", "add"), _INSTALL))
    table.update(
        {name: Spec("--all --json -g --global --long", "", "--depth") for name in ("ls", "list")}
    )
    table["outdated"] = Spec("--json --long -g --global")
    table.update(dict.fromkeys(("view", "info", "show"), Spec("--json")))
    return table


_NPM_INFO = "--version -v --help -h"
NPM = Spec(*_NPM_GLOBAL, subcommands=_npm("start", "stop", "restart"), info=_NPM_INFO)
"""``npm``: no ``exec``, ``x``, ``--script-shell``; words passed to a script are plain."""
PNPM = Spec(*_NPM_GLOBAL, subcommands=_npm("start"), info=_NPM_INFO)
YARN = Spec("--silent -s --version -v --help -h", "--cwd", subcommands=_npm(), info=_NPM_INFO)
"""``yarn``: only ``run``/``test``/``install`` (``yarn <name>`` may run a binary)."""

_CARGO_COMMON = (
    "--release -r --all --workspace --all-features --no-default-features --lib --bins "
    "--tests --examples --benches --all-targets -q --quiet -v --verbose -vv --offline "
    "--locked --frozen --keep-going --doc --no-fail-fast --no-run --future-incompat-report "
    "--ignore-rust-version",
    "-p --package --features -F --bin --test --example --bench -j --jobs --target "
    "--target-dir --message-format --manifest-path --exclude --profile --color",
)
_LINTS = Spec("", "-D -W -A -F --deny --warn --allow --forbid")
CARGO = Spec(
    "-q --quiet -v --verbose --version -V --offline --locked --frozen -h --help",
    "--color --manifest-path",
    info="--version -V -h --help",
    subcommands={
        "build": Spec(*_CARGO_COMMON, rest=Spec()),
        "b": Spec(*_CARGO_COMMON, rest=Spec()),
        "check": Spec(*_CARGO_COMMON, rest=Spec()),
        "c": Spec(*_CARGO_COMMON, rest=Spec()),
        "test": Spec(*_CARGO_COMMON, rest=Spec(anything=True)),
        "t": Spec(*_CARGO_COMMON, rest=Spec(anything=True)),
        "clippy": Spec(*_CARGO_COMMON, rest=_LINTS),
        "doc": Spec(_CARGO_COMMON[0] + " --no-deps --document-private-items", _CARGO_COMMON[1]),
        "fmt": Spec(
            "--all -q --quiet -v --verbose --check",
            "-p --package --manifest-path",
            rest=Spec("--check"),
        ),
        "tree": Spec("--all-features --no-dedupe -d --duplicates", "-p --package -i --invert -e"),
        "metadata": Spec("--no-deps --offline --locked", "--format-version"),
    },
)
"""``cargo``: no ``--config``, ``+toolchain``, ``run``, ``install``, ``rustc``; the words
after ``clippy --`` are lint levels only."""

_GO_BUILD = (
    "-v -race -short -cover -failfast -json -n -a -trimpath -benchmem -x -i -msan -asan -work "
    "-modcacherw -buildvcs",
    "-run -count -timeout -bench -benchtime -cpu -p -o -tags -mod -coverprofile -covermode "
    "-coverpkg -parallel -shuffle -skip -C -buildmode -pgo -fuzz -fuzztime -list",
)
GO = Spec(
    "",
    "",
    subcommands={
        "build": Spec(*_GO_BUILD, single_dash=True, rest=Spec()),
        "test": Spec(*_GO_BUILD, single_dash=True, rest=Spec()),
        "vet": Spec("-json -n -x", "-C -tags -mod", single_dash=True),
        "fmt": Spec("-n -x", "-mod", single_dash=True),
        "version": Spec("-m -v", single_dash=True),
        "list": Spec(
            "-json -m -u -versions -deps -test -e -find -retracted", "-f -mod -C", single_dash=True
        ),
        "env": Spec("-json", single_dash=True),
        "mod": Spec("-v -json -x", "-go -compat", single_dash=True),
    },
)
"""``go``: no ``-toolexec``, ``-exec``, ``-ldflags``/``-gcflags`` (which pick a linker or
compiler), ``-vettool``, ``-overlay``, ``run``, ``generate``, ``env -w``."""

PYTEST = Spec(
    "-q --quiet -v --verbose -x --exitfirst -s -l --showlocals --lf --last-failed --ff "
    "--failed-first --nf --new-first --sw --stepwise --co --collect-only --no-header "
    "--no-summary --disable-warnings --strict-markers --strict-config --runxfail --cache-clear "
    "--setup-show --setup-only --setup-plan -vv -vvv -qq --version -V -h --help --fixtures "
    "--markers --full-trace",
    "-k -m --maxfail --tb -r --durations --durations-min --rootdir --basetemp -p -W "
    "--pythonwarnings --import-mode --log-level --log-cli-level --deselect --ignore "
    "--ignore-glob --confcutdir --cov --cov-report --junitxml --junit-xml -n --numprocesses "
    "--color --capture --timeout -c --config-file --randomly-seed",
)
"""``pytest``: no ``--pdb``, ``--pdbcls``, ``--trace`` (a debugger reading its input),
``-o``/``--override-ini``."""

TSC = Spec(
    "--noEmit --build -b --watch --pretty --strict --declaration --incremental --skipLibCheck "
    "--listFiles --listEmittedFiles --version -v --help -h --verbose --force --clean --dry "
    "--noImplicitAny --sourceMap --esModuleInterop --allowJs --checkJs --showConfig",
    "-p --project --outDir --target --module --lib --jsx --moduleResolution --rootDir "
    "--outFile --tsBuildInfoFile",
)

_PIP_GLOBAL = (
    "-q --quiet -v --verbose --isolated --no-input --disable-pip-version-check --no-color "
    "--no-cache-dir --require-virtualenv --version -V -h --help",
    "--cache-dir --timeout --retries --index-url -i --extra-index-url --trusted-host",
)
PIP = Spec(
    *_PIP_GLOBAL,
    subcommands={
        "list": Spec(
            "-o --outdated -u --uptodate -e --editable -l --local --user --not-required "
            "--exclude-editable --include-editable",
            "--format --exclude",
        ),
        "show": Spec("-f --files"),
        "freeze": Spec("-l --local --user --all --exclude-editable", "--exclude"),
        "check": Spec(),
        "install": Spec(
            "-U --upgrade --no-deps --pre --user --force-reinstall -I --ignore-installed "
            "--no-build-isolation --dry-run --no-index --require-hashes --break-system-packages",
            "-r --requirement -c --constraint -e --editable --upgrade-strategy -f --find-links",
        ),
    },
    info="--version -V -h --help",
)
"""``pip``: package queries and ``install`` (which runs the build scripts of what it
installs: files, not code on the command line); no ``--python`` (another interpreter),
``--global-option``, ``--config-settings``, ``-t``/``--prefix``/``--root``."""

VETTED: dict[str, Spec] = {
    "git": GIT,
    "npm": NPM,
    "pnpm": PNPM,
    "yarn": YARN,
    "cargo": CARGO,
    "go": GO,
    "pytest": PYTEST,
    "py.test": PYTEST,
    "tsc": TSC,
    "pip": PIP,
    "pip3": PIP,
    "make": MAKE,
    "gmake": MAKE,
    "find": FIND,
    "tar": TAR,
}
"""Programs that run other programs, with their vetted options and subcommands."""
