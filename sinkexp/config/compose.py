"""Hydra composition, in one place: overrides read with Hydra's own parser, a sweep expanded as
Hydra's basic sweeper expands it, each job's config composed, and a composition error turned into
one line naming the key.

    with initialized():
        jobs = expand(overrides, multirun=True, params={})      # [["attn=softmax", "seed=0"], ...]
        full = compose(jobs[0])                                  # Hydra's config, its hydra node included
        grid = sweeper_choices(full)                             # an experiment file's hydra.sweeper.params
    cfg = compose_config("task=damping", "seed=1")               # a validated Config, for tests and scripts

Only the command layer reads a command's override strings (commands/overrides.py, `sinkexp measure`'s
expand); a composed config's sweeper params are read here (sweeper_choices). Nothing here runs a
job: sinkexp/jobs/plan.py composes every job of a command once and checks it.
"""

from __future__ import annotations

import contextlib

from hydra import compose as hydra_compose
from hydra import initialize_config_module
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import Override
from omegaconf import DictConfig, OmegaConf

from sinkexp.config.compositions import cached
from sinkexp.config.schema import CONFIG_MODULE, Config, register_schema
from sinkexp.config.sweep import Choices, combinations
from sinkexp.config.typed import train_integer_keys, whole_number
from sinkexp.errors import ConfigError, choices_error, omegaconf_message, unknown_key

PARSE_HINT = "quote values with spaces or special characters, e.g. key='a b'"


@contextlib.contextmanager
def initialized():
    """Hydra's config search path set to configs/ (sinkexp.conf), the schema and sinkexp's resolvers
    registered; inside a Hydra app already initialised, that one is used."""
    from sinkexp.config.identity import register_resolvers  # lazy: imports torch; compose stays torch-free

    register_schema()
    register_resolvers()
    if GlobalHydra.instance().is_initialized():
        yield
        return
    with initialize_config_module(CONFIG_MODULE, version_base="1.3"):
        yield


def parse(overrides: list[str]) -> list[Override]:
    """Hydra's reading of KEY=VALUE overrides; ConfigError, one line, for one it cannot parse."""
    parser = OverridesParser.create()
    try:
        return parser.parse_overrides(list(overrides))
    except Exception as err:
        first = str(err).splitlines()[0] if str(err).strip() else err.__class__.__name__
        for override in overrides:  # name the one that fails, whole (a newline in it too)
            try:
                parser.parse_overrides([override])
            except Exception:
                kind = first.partition(":")[0]
                raise ConfigError(f"cannot parse the overrides: {override!r} ({kind}); {PARSE_HINT}") from None
        raise ConfigError(f"cannot parse the overrides ({first}); {PARSE_HINT}") from None


def as_hydra_override(arg: str) -> str:
    """`experiment=NAME` means what Hydra spells `+experiment=NAME` (the group is not in the defaults)."""
    return "+" + arg if arg.startswith("experiment=") else arg


def expand(overrides: list[str], multirun: bool, params: dict, command: str = "sinkexp train") -> list[list[str]]:
    """Every combination of a sweep's values, as lists of plain KEY=VALUE overrides, in the order
    of Hydra's basic sweeper: the config's own hydra.sweeper.params (an experiment's grid) first,
    the command line after, a key given in both taking the command line's values in its place.
    `command` names the command in the error for a sweep without -m (`sinkexp measure` too)."""
    grid = params_choices(params) if multirun else ()
    return combinations(grid, choices_of(parse(list(overrides)), multirun, command))


def choices_of(parsed: list[Override], multirun: bool, command: str = "sinkexp train") -> Choices:
    """Each override's key with the KEY=VALUE line of each of its values (a sweep's, or its one),
    whole numbers as integers (whole_numbers); ConfigError for a sweep without -m (`command -m`)."""
    choices: dict[str, tuple[str, ...]] = {}
    for override in parsed:
        key = override.get_key_element()
        if override.is_sweep_override():
            if not multirun:
                raise ConfigError(f"{override.input_line}: a sweep needs -m ({command} -m ...)")
            choices[key] = tuple(whole_numbers([f"{key}={value}" for value in override.sweep_string_iterator()]))
        else:
            choices[key] = (integral(override, override.input_line),)
    return tuple(choices.items())


def sweeper_choices(master: DictConfig) -> Choices:
    """The composed config's own hydra.sweeper.params (an experiment file's grid) as choices: config,
    read where the config is composed, as Hydra's basic sweeper reads them once it has composed."""
    return params_choices(master.hydra.sweeper.params or {})


def params_choices(params) -> Choices:
    """Sweeper params ({key: "a,b"}) as choices."""
    return choices_of(parse([f"{key}={value}" for key, value in params.items()]), multirun=True)


def whole_numbers(overrides: list[str]) -> list[str]:
    """The overrides with a whole number written as a float (`train.steps=1e3`, which Hydra reads as
    1000.0) given as the integer it is, for the keys the schema types as integers (config/typed.py);
    ConfigError for one that is not whole (`train.steps=2.5`). A sweep's values are each a job's:
    `choices_of` reads each as its own override."""
    return [line if o.is_sweep_override() else integral(o, line) for o, line in zip(parse(overrides), overrides)]


def integral(override: Override, line: str) -> str:
    """`line`, the override of one value, with its whole number as an integer (whole_numbers)."""
    value, key = override.value(), override.key_or_group
    if key in train_integer_keys() and isinstance(value, float):
        return f"{override.get_key_element()}={whole_number(key, value, line.partition('=')[2])}"
    return line


def compose(overrides: list[str]) -> DictConfig:
    """Hydra's composed config of one job (its hydra node included), inside `initialized()`, or the
    same composition kept from an earlier command (compositions.py); ConfigError, one line naming
    the key, for anything Hydra refuses."""
    try:
        return cached(overrides, lambda: hydra_compose("config", overrides=list(overrides), return_hydra_config=True))
    except ConfigError:
        raise
    except Exception as err:
        raise explain(list(overrides), err) from None


def compose_config(*overrides: str) -> Config:
    """A validated Config from KEY=VALUE overrides, composed as `sinkexp train` composes a job,
    without running anything (for tests, scripts and `reproduce --estimate`)."""
    from sinkexp.config.validate import from_dictconfig  # lazy: imports torch; compose stays torch-free

    with initialized():
        return from_dictconfig(compose(whole_numbers([as_hydra_override(o) for o in overrides])))


def explain(overrides: list[str], err: Exception) -> ConfigError:
    """A Hydra composition error as one line naming the key and what is valid there."""
    loader = GlobalHydra.instance().config_loader()
    parsed = parse(overrides)
    chosen = []  # group choices (hydra/launcher too), checked first
    for override in parsed:
        if _is_group(loader, override.key_or_group):
            options = loader.get_group_options(override.key_or_group)
            if override.value() not in options:
                return choices_error(override.key_or_group, override.value(), options)
            chosen.append(override.input_line)
    base = hydra_compose("config", overrides=chosen, return_hydra_config=True)
    for override in parsed:
        key = override.key_or_group
        absent = OmegaConf.select(base, key, default=KeyError) is KeyError
        if not _is_group(loader, key) and not override.is_add() and absent:
            parent, _, leaf = key.rpartition(".")
            exists = not parent or isinstance(OmegaConf.select(base, parent, default=None), DictConfig)
            while parent and not isinstance(OmegaConf.select(base, parent, default=None), DictConfig):
                parent = parent.rpartition(".")[0]  # the deepest part of the key that exists
            node = OmegaConf.select(base, parent) if parent else base
            # a misspelt leaf among its siblings; a misspelt section among every key
            return unknown_key(key, [str(k) for k in node.keys()], parent, None if exists else dotted_keys(base))
    return ConfigError(omegaconf_message(err.__cause__ or err))


def dotted_keys(node: DictConfig, prefix: str = "") -> list[str]:
    """Every key of a composed config as its dotted name (train.steps, ...), Hydra's own node left out."""
    keys = []
    for key in node.keys():
        name, child = f"{prefix}{key}", node._get_node(key)
        if name == "hydra":
            continue
        keys.append(name)
        if isinstance(child, DictConfig):
            keys += dotted_keys(child, f"{name}.")
    return keys


def _is_group(loader, key: str) -> bool:
    """Whether `key` names a config group (attn, hydra/launcher, ...) rather than a key."""
    parent, _, leaf = key.rpartition("/")
    return "." not in key and leaf in loader.list_groups(parent)


def pack_first_values(overrides: list[str]) -> list[str]:
    """`pack={key: [a, b]}` makes key=a the job's own value (an override appended for each packed
    key), so that the job's config is its pack's first run and the job's folder (its log, .hydra/)
    is that run's directory. ConfigError for a key both swept and packed."""
    parsed = parse(overrides)
    packs = [o.value() for o in parsed if o.key_or_group == "pack" and isinstance(o.value(), dict)]
    if not packs:  # anything else in `pack` is refused by schema.run_configs
        return []
    swept = {o.key_or_group for o in parsed if o.is_sweep_override()}
    firsts = []
    for key, values in packs[-1].items():  # the last `pack=` wins, as for any key
        if key in swept:
            raise ConfigError(f"{key} is both swept and packed (pack={packs[-1]}); give its values in one place")
        if isinstance(values, list) and values:
            firsts.append(f"{key}={values[0]}")
    return firsts
