"""The course: what an instructor wrote, read and checked.

An assignment's spec and its expression language (``spec``), the rubric (``rubric``) in the
words ``vocabulary`` defines, the cases a spec lists or draws (``cases``), a course folder read
whole (``folder``), which file of a submission is which assignment's (``discovery``) and what a
submitted file must be before a compiler sees it (``policy``), and the instructor's markers and
scaffold (``authoring``). Imports the contract's root modules and the compiler's header list;
nothing of grading.
"""
