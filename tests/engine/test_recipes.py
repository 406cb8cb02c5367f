"""Recipes: the shipped files load, offer what the reference site asks, and bad files are reported well."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llm_fabric.distribution import data_path
from llm_fabric.engine.recipes import get_recipe, load_recipes, recipe_ids
from llm_fabric.errors import ConfigError, UsageError
from llm_fabric.site.loader import load_site

REQUIRED = [
    "kimi-k2.6",
    "glm-5.1",
    "deepseek-v3.2",
    "deepseek-v3",
    "qwen3.5",
    "qwen3.5-122b",
    "gpt-oss-120b",
    "mistral-small-4",
    "llama-3.3-70b",
]


def test_required_recipes_load() -> None:
    recipes = load_recipes()
    assert set(REQUIRED) <= set(recipes) == set(recipe_ids())
    for recipe in recipes.values():
        assert recipe.source and recipe.generation.max_output_tokens == 32768
        assert recipe.default_quantization in recipe.quantizations


def test_reference_site_deployments_are_offered() -> None:
    site = load_site(data_path("examples", "cerit-sc"))
    for dep in site.deployments.values():
        recipe = get_recipe(dep.recipe)
        assert dep.quantization in recipe.quantizations, dep.name
        assert dep.tensor_parallel_size in recipe.tensor_parallel_sizes, dep.name


def test_unknown_recipe_suggests() -> None:
    with pytest.raises(UsageError) as err:
        get_recipe("kimi-k2.5")
    assert "kimi-k2.6" in (err.value.hint or "")
    with pytest.raises(UsageError):
        get_recipe("llama-3.3-70b").quantization("nvfp4")


def _copy(tmp_path: Path, recipe_id: str) -> Path:
    folder = tmp_path / "models"
    folder.mkdir()
    target = folder / f"{recipe_id}.yaml"
    shutil.copy(data_path("engine", "models", f"{recipe_id}.yaml"), target)
    return target


def test_misspelt_key_names_file_line_and_fix(tmp_path: Path) -> None:
    path = _copy(tmp_path, "llama-3.3-70b")
    lines = path.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if line.startswith("tool_call_parser:"))
    lines[index] = lines[index].replace("tool_call_parser", "tool_call_parsr")
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigError) as err:
        load_recipes(path.parent)
    text = err.value.render()
    assert f"{path}:{index + 1}" in text and "did you mean `tool_call_parser`" in text


def test_tensor_parallel_must_divide_heads(tmp_path: Path) -> None:
    path = _copy(tmp_path, "gpt-oss-120b")
    path.write_text(path.read_text().replace("tensor_parallel_sizes: [1, 2, 4, 8]", "tensor_parallel_sizes: [1, 3]"))
    with pytest.raises(ConfigError) as err:
        load_recipes(path.parent)
    assert "3 does not divide the 64 attention heads" in err.value.render()


def test_layer_split_must_add_up(tmp_path: Path) -> None:
    path = _copy(tmp_path, "qwen3.5")
    path.write_text(path.read_text().replace("kv_layers: 15", "kv_layers: 16"))
    with pytest.raises(ConfigError) as err:
        load_recipes(path.parent)
    assert "must equal layers" in err.value.render()


def test_every_recipe_has_canary_prompts_with_a_tool_call_its_parser_reads() -> None:
    for recipe in load_recipes().values():
        names = [p.name for p in recipe.canary]
        assert names == ["capital", "count", "tool"], recipe.id
        assert recipe.tool_call_parser is not None


def test_canary_prompts_are_checked(tmp_path: Path) -> None:
    path = _copy(tmp_path, "qwen3.5")
    text = path.read_text()
    path.write_text(text.replace("{name: count,", "{name: capital,"))
    with pytest.raises(ConfigError) as err:
        load_recipes(path.parent)
    assert "canary: prompt names must be unique" in err.value.render()
    path.write_text(text.replace("tool_call_parser: qwen3_coder\nreasoning_parser", "reasoning_parser"))
    with pytest.raises(ConfigError) as err:
        load_recipes(path.parent)
    assert "a tool_call prompt needs the recipe's tool_call_parser" in err.value.render()
    path.write_text(text.replace("max_tokens: 8, script: latin", "max_tokens: 8, script: latn"))
    with pytest.raises(ConfigError) as err:
        load_recipes(path.parent)
    line = next(i for i, x in enumerate(text.splitlines(), 1) if "{name: capital," in x)
    assert f"{path}:{line}: canary[0].script: Input should be 'latin'" in err.value.render()
