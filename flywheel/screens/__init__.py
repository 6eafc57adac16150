"""Reading a phone's screen, shared by every stage: the selector language of known paths and
milestones (selectors), what a person calls an element (labels), same page or new page
(page_identity) and the sentence embeddings of screen and query texts (embedding)."""
