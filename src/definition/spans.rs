//! Where in a file a fault is: line numbers of byte offsets.

/// Line numbers (from 1) of byte offsets in a text: the offsets where lines
/// start, found once, then a binary search per lookup.
pub(crate) struct Lines {
    /// Byte offset of the start of each line; the first is 0.
    starts: Vec<usize>,
}

impl Lines {
    /// The line table of `text`.
    pub(crate) fn new(text: &str) -> Lines {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Lines { starts }
    }

    /// The line (from 1) that holds byte `offset`; an offset past the end
    /// is on the last line.
    pub(crate) fn line_of(&self, offset: usize) -> usize {
        // The starts at or before `offset` count the lines up to it.
        self.starts.partition_point(|&s| s <= offset)
    }
}
