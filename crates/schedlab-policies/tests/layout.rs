//! The layout of the policy modules: within a policy's directory each file uses
//! the files below it and none of them uses it back (what every kernel version
//! shares sits low, what a version changes sits in the files that use it). A
//! file's unit tests may reach anywhere and are not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The sibling modules `src` names through `super::` (also in `use super::{a, b}`
/// lists) or `crate::<dir>::`, outside its `#[cfg(test)] mod tests`.
fn sibling_uses(src: &str, dir: &str, siblings: &BTreeSet<String>) -> BTreeSet<String> {
    let code = src.split("#[cfg(test)]\nmod tests").next().unwrap_or(src);
    let mut uses = BTreeSet::new();
    for prefix in ["super::".to_string(), format!("crate::{dir}::")] {
        for (at, _) in code.match_indices(&prefix) {
            let rest = &code[at + prefix.len()..];
            let names: Vec<&str> = if let Some(list) = rest.strip_prefix('{') {
                list[..list.find('}').unwrap_or(list.len())]
                    .split(',')
                    .map(|n| n.trim().split("::").next().unwrap_or(""))
                    .collect()
            } else {
                vec![rest.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).next().unwrap_or("")]
            };
            uses.extend(names.into_iter().filter(|n| siblings.contains(*n)).map(str::to_string));
        }
    }
    uses
}

/// A cycle in `graph`, if there is one, as the modules along it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == m) {
            let mut cycle = path[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        path.push(m.to_string());
        for next in &graph[m] {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

/// The import graph of the modules in `src/<dir>`.
fn graph_of(dir: &str) -> BTreeMap<String, BTreeSet<String>> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(dir);
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&path).expect("the policy directory") {
        let p = entry.expect("a directory entry").path();
        let name = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
        if p.extension().is_some_and(|e| e == "rs") && name != "mod" {
            files.insert(name, std::fs::read_to_string(&p).expect("a source file"));
        }
    }
    let siblings: BTreeSet<String> = files.keys().cloned().collect();
    files.iter().map(|(m, src)| (m.clone(), sibling_uses(src, dir, &siblings).into_iter().filter(|u| u != m).collect())).collect()
}

#[test]
fn the_policy_modules_import_each_other_in_one_direction() {
    for dir in ["cfs", "ule"] {
        let graph = graph_of(dir);
        assert!(graph.len() > 3, "{dir}: found only {:?}", graph.keys());
        assert_eq!(find_cycle(&graph), None, "{dir}: modules that import each other");
    }
}

#[test]
fn the_cycle_finder_finds_a_cycle() {
    let siblings: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), sibling_uses("use super::b::X;", "cfs", &siblings));
    graph.insert(
        "b".to_string(),
        sibling_uses("use super::{c, d::Y};\n#[cfg(test)]\nmod tests { use super::a; }", "cfs", &siblings),
    );
    graph.insert("c".to_string(), sibling_uses("fn f() { crate::cfs::a::g(); }", "cfs", &siblings));
    assert_eq!(graph["b"], BTreeSet::from(["c".to_string()]));
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
    graph.insert("c".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&graph), None);
}
