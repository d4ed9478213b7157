//! Hard-link groups against what the scan found: the further names of a group whose first
//! name cannot be restored are not restored either.

use super::{EntryAction, Scan};
use crate::plan::Plan;

impl Scan {
    /// The further names of a hard-link group whose first name is not restored (a folder in its
    /// way, its own folder not restored) are not linked either: said so by the plan, so that
    /// `-v`, `--json` and a dry run no longer list them as restored, and the run reports them
    /// as it reports every entry it cannot restore.
    pub(crate) fn unlink_blocked_groups(&mut self, plan: &Plan) {
        for (&first, links) in &plan.links {
            if !matches!(self.entries[first as usize], EntryAction::Blocked(_)) {
                continue;
            }
            for &l in links {
                let action = &mut self.entries[l as usize];
                if !matches!(action, EntryAction::Skip | EntryAction::Blocked(_)) {
                    *action = EntryAction::Blocked(format!(
                        "{}: not linked: {} was not restored",
                        arca_format::text::shown(&plan.entry_path(l)),
                        arca_format::text::shown(&plan.entry_path(first))
                    ));
                }
            }
        }
    }
}
