package outline

// EditWithin is editWithin, for the tests.
var EditWithin = editWithin
