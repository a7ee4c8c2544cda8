// Click a column's header to sort its table (again: the other way); a cell's data-sort is its key.
document.querySelectorAll("table.sortable").forEach((table) => {
  const headers = Array.from(table.tHead.rows[0].cells);
  const key = (row, column) => row.cells[column].dataset.sort ?? row.cells[column].textContent.trim();
  const compare = (a, b) => (a !== "" && b !== "" && !isNaN(a) && !isNaN(b) ? a - b : a.localeCompare(b));
  headers.forEach((header, column) => {
    header.addEventListener("click", () => {
      const ascending = header.getAttribute("aria-sort") !== "ascending";
      headers.forEach((other) => other.removeAttribute("aria-sort"));
      header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
      const body = table.tBodies[0];
      const rows = Array.from(body.rows);
      rows.sort((a, b) => compare(key(a, column), key(b, column)) * (ascending ? 1 : -1));
      body.append(...rows);
    });
  });
});
