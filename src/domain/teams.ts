// The team the public API names for entries and notes written outside any team's rendering
// (through the API): its published items require a team. No team may take the name.
export const NO_TEAM = "(no team)";
