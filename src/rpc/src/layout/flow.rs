//! A flow network with integer capacities and costs: Dinic's maximum flow,
//! and a primal-dual minimum-cost maximum flow (Dijkstra with potentials to
//! find the shortest augmenting distance, then Dinic restricted to the edges
//! of zero reduced cost to push every shortest path of that length at once).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

pub type Vertex = usize;

#[derive(Clone, Debug)]
struct Edge {
    to: Vertex,
    /// Remaining capacity.
    cap: u64,
    cost: i64,
}

/// Edges are stored in pairs: edge `2k` and its reverse `2k + 1`.
#[derive(Clone, Debug, Default)]
pub struct FlowGraph {
    edges: Vec<Edge>,
    adj: Vec<Vec<usize>>,
}

/// Handle of an edge added with [`FlowGraph::add_edge`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EdgeId(usize);

const INF_DIST: i64 = i64::MAX / 4;

impl FlowGraph {
    pub fn new(vertices: usize) -> Self {
        Self {
            edges: Vec::new(),
            adj: vec![Vec::new(); vertices],
        }
    }

    pub fn add_edge(&mut self, from: Vertex, to: Vertex, cap: u64, cost: i64) -> EdgeId {
        let id = self.edges.len();
        self.edges.push(Edge { to, cap, cost });
        self.edges.push(Edge {
            to: from,
            cap: 0,
            cost: -cost,
        });
        self.adj[from].push(id);
        self.adj[to].push(id + 1);
        EdgeId(id)
    }

    /// Flow currently going through an edge.
    pub fn flow(&self, e: EdgeId) -> u64 {
        self.edges[e.0 ^ 1].cap
    }

    /// Maximum flow from `s` to `t` (added to any flow already present).
    pub fn max_flow(&mut self, s: Vertex, t: Vertex) -> u64 {
        let all = |_: &Edge, _: Vertex| true;
        self.dinic(s, t, &all)
    }

    /// Pushes a maximum flow from `s` to `t` of minimum total cost; edge
    /// costs must be non-negative and the graph must carry no flow yet.
    /// Returns (flow, cost).
    pub fn min_cost_max_flow(&mut self, s: Vertex, t: Vertex) -> (u64, i64) {
        debug_assert!(self.edges.iter().step_by(2).all(|e| e.cost >= 0));
        let n = self.adj.len();
        let mut pot = vec![0i64; n];
        let mut total_flow = 0;
        loop {
            let dist = self.dijkstra(s, &pot);
            if dist[t] >= INF_DIST {
                break;
            }
            for v in 0..n {
                if dist[v] < INF_DIST {
                    pot[v] += dist[v];
                }
            }
            // Push along every path made only of zero-reduced-cost edges:
            // these are exactly the shortest augmenting paths.
            let admissible = |e: &Edge, from: Vertex| e.cost + pot[from] - pot[e.to] == 0;
            let pushed = self.dinic(s, t, &admissible);
            if pushed == 0 {
                break;
            }
            total_flow += pushed;
        }
        let cost = self
            .edges
            .iter()
            .step_by(2)
            .enumerate()
            .map(|(i, e)| e.cost * self.edges[2 * i + 1].cap as i64)
            .sum();
        (total_flow, cost)
    }

    fn dijkstra(&self, s: Vertex, pot: &[i64]) -> Vec<i64> {
        let mut dist = vec![INF_DIST; self.adj.len()];
        let mut heap = BinaryHeap::new();
        dist[s] = 0;
        heap.push(Reverse((0i64, s)));
        while let Some(Reverse((d, u))) = heap.pop() {
            if d > dist[u] {
                continue;
            }
            for &ei in &self.adj[u] {
                let e = &self.edges[ei];
                if e.cap == 0 {
                    continue;
                }
                let nd = d + e.cost + pot[u] - pot[e.to];
                if nd < dist[e.to] {
                    dist[e.to] = nd;
                    heap.push(Reverse((nd, e.to)));
                }
            }
        }
        dist
    }

    /// Dinic's algorithm over the residual edges that `usable` accepts.
    fn dinic(&mut self, s: Vertex, t: Vertex, usable: &dyn Fn(&Edge, Vertex) -> bool) -> u64 {
        let n = self.adj.len();
        let mut total = 0;
        loop {
            // Levels by BFS.
            let mut level = vec![u32::MAX; n];
            level[s] = 0;
            let mut queue = VecDeque::from([s]);
            while let Some(u) = queue.pop_front() {
                for &ei in &self.adj[u] {
                    let e = &self.edges[ei];
                    if e.cap > 0 && level[e.to] == u32::MAX && usable(e, u) {
                        level[e.to] = level[u] + 1;
                        queue.push_back(e.to);
                    }
                }
            }
            if level[t] == u32::MAX {
                return total;
            }
            // Blocking flow by iterative DFS with per-vertex edge cursors.
            let mut cursor = vec![0usize; n];
            loop {
                let pushed = self.augment(s, t, &level, &mut cursor, usable);
                if pushed == 0 {
                    break;
                }
                total += pushed;
            }
        }
    }

    /// Finds one augmenting path in the level graph and pushes its
    /// bottleneck; returns the amount pushed (0 when there is none).
    fn augment(
        &mut self,
        s: Vertex,
        t: Vertex,
        level: &[u32],
        cursor: &mut [usize],
        usable: &dyn Fn(&Edge, Vertex) -> bool,
    ) -> u64 {
        let mut path: Vec<usize> = Vec::new();
        let mut u = s;
        loop {
            if u == t {
                let bottleneck = path.iter().map(|&ei| self.edges[ei].cap).min().unwrap_or(0);
                for &ei in &path {
                    self.edges[ei].cap -= bottleneck;
                    self.edges[ei ^ 1].cap += bottleneck;
                }
                return bottleneck;
            }
            let mut advanced = false;
            while cursor[u] < self.adj[u].len() {
                let ei = self.adj[u][cursor[u]];
                let e = &self.edges[ei];
                if e.cap > 0 && level[e.to] == level[u] + 1 && usable(e, u) {
                    path.push(ei);
                    u = e.to;
                    advanced = true;
                    break;
                }
                cursor[u] += 1;
            }
            if !advanced {
                // Dead end: retreat and skip the edge that led here.
                match path.pop() {
                    None => return 0,
                    Some(ei) => {
                        u = self.edges[ei ^ 1].to;
                        cursor[u] += 1;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_flow_of_a_small_network() {
        // Classic example: max flow 23.
        let mut g = FlowGraph::new(6);
        for (a, b, c) in [
            (0, 1, 16),
            (0, 2, 13),
            (1, 2, 10),
            (2, 1, 4),
            (1, 3, 12),
            (3, 2, 9),
            (2, 4, 14),
            (4, 3, 7),
            (3, 5, 20),
            (4, 5, 4),
        ] {
            g.add_edge(a, b, c, 0);
        }
        assert_eq!(g.max_flow(0, 5), 23);
    }

    #[test]
    fn min_cost_prefers_cheap_paths_and_reroutes() {
        // s=0 -> a=1, b=2 -> t=3. The maximum flow is 3 and the cheap path
        // through a carries only 1 of it.
        let mut g = FlowGraph::new(4);
        let sa = g.add_edge(0, 1, 1, 0);
        let sb = g.add_edge(0, 2, 2, 0);
        g.add_edge(1, 3, 2, 1);
        g.add_edge(2, 3, 2, 5);
        let (f, c) = g.min_cost_max_flow(0, 3);
        assert_eq!((f, c), (3, 11));
        assert_eq!((g.flow(sa), g.flow(sb)), (1, 2));
    }

    #[test]
    fn min_cost_needs_a_reverse_edge() {
        // A case where the optimum cancels flow pushed by an earlier phase.
        // s=0, a=1, b=2, c=3, d=4, t=5.
        let mut g = FlowGraph::new(6);
        g.add_edge(0, 1, 1, 0);
        g.add_edge(0, 2, 1, 0);
        g.add_edge(1, 3, 1, 0);
        g.add_edge(1, 4, 1, 3);
        g.add_edge(2, 3, 1, 1);
        g.add_edge(3, 5, 1, 0);
        g.add_edge(4, 5, 1, 0);
        // Max flow 2 needs a->d, b->c: cost 4.
        assert_eq!(g.min_cost_max_flow(0, 5), (2, 4));
    }
}
