"""Type stubs of the native module (crate schedlab-py); see schedlab/__init__.py."""

from typing import Any, Dict, List, Optional, Tuple

SOURCE_REVISION: str
SOURCE_DIGEST: str

def run(
    topology: str, machine: Optional[str], policy: str, workload: str, seed: int, sysctls: List[str], hz: int,
    preempt: Optional[str], autogroup: Optional[str], check: bool, events: bool,
) -> Dict[str, Any]: ...
def compare(
    base: str, new: str, others: List[str], topology: str, machine: Optional[str], workload: str,
    vary: Optional[str], runs: int, sysctls: List[str], hz: int, preempt: Optional[str],
    autogroup: Optional[str], seed: int, jobs: Optional[int],
) -> Dict[str, str]: ...
def reproduce(
    name: str, runs: Optional[int], scale: Optional[str], rows: Optional[List[str]], jobs: Optional[int],
) -> Dict[str, str]: ...
def sweep_jobs(
    toml: Optional[str], axes: Optional[List[Tuple[str, List[str]]]], runs: int, seed: int, shard: Optional[str],
) -> str: ...
def sweep_one(index: int, params: List[Tuple[str, str]], seed: int, cache: Optional[str]) -> Tuple[str, str]: ...
def sweep_local(
    toml: Optional[str], axes: Optional[List[Tuple[str, List[str]]]], runs: int, seed: int, cache: Optional[str],
    shard: Optional[str], jobs: Optional[int],
) -> Tuple[str, int, int, int]: ...
def default_cache_dir() -> str: ...
