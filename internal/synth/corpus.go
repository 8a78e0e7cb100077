package synth

// fact is one answerable statement of the knowledge base and a question it answers.
type fact struct {
	question string
	answer   string
}

// article is one document of the knowledge base.
type article struct {
	id    string
	title string
	facts []fact
}

// corpus is the synthetic help center of "Nimbus", a fictional cloud storage service.
var corpus = []article{
	{"kb-pricing", "Storage pricing", []fact{
		{"How much does Nimbus standard storage cost?", "Standard storage costs 2 cents per gigabyte per month."},
		{"Is there a charge for deleting files early from archive storage?", "Archive storage has a minimum storage duration of 90 days."},
		{"Do I pay for uploads?", "Uploading data into Nimbus is free of charge."},
	}},
	{"kb-regions", "Regions", []fact{
		{"In how many regions is Nimbus available?", "Nimbus is available in 14 regions across 5 continents."},
		{"Which region is the default for new buckets?", "New buckets are created in the Frankfurt region unless another region is chosen."},
		{"Can I move a bucket to another region?", "A bucket cannot be moved, but its objects can be copied to a bucket in another region."},
	}},
	{"kb-limits", "Limits", []fact{
		{"What is the largest object I can store?", "A single object can be at most 5 terabytes in size."},
		{"How many buckets can an account have?", "Each account can create up to 1000 buckets."},
		{"Is there a limit on requests per second?", "Each bucket accepts up to 3500 write requests per second."},
	}},
	{"kb-security", "Security", []fact{
		{"Is my data encrypted at rest?", "All objects are encrypted at rest with AES-256."},
		{"Which TLS versions does Nimbus accept?", "The API only accepts TLS 1.2 and TLS 1.3 connections."},
		{"Can I bring my own encryption keys?", "Customer-managed keys are supported through the key management service."},
	}},
	{"kb-versioning", "Versioning", []fact{
		{"How do I keep old versions of files?", "Object versioning keeps every version of an object once it is enabled on the bucket."},
		{"Can versioning be turned off?", "Versioning can be suspended but never fully disabled after it was enabled."},
		{"How long are deleted versions kept?", "Deleted versions are kept until a lifecycle rule removes them."},
	}},
	{"kb-lifecycle", "Lifecycle rules", []fact{
		{"How can I move old data to cheaper storage automatically?", "Lifecycle rules move objects to archive storage after a number of days you choose."},
		{"How often are lifecycle rules applied?", "Lifecycle rules are evaluated once a day."},
		{"How many lifecycle rules can a bucket have?", "A bucket can hold up to 100 lifecycle rules."},
	}},
	{"kb-access", "Access control", []fact{
		{"How do I share a file without making it public?", "Signed URLs grant temporary access to a single object for up to 7 days."},
		{"Are new buckets public?", "New buckets block all public access by default."},
		{"Can I restrict access by IP address?", "Bucket policies can restrict access to a list of IP ranges."},
	}},
	{"kb-replication", "Replication", []fact{
		{"How does Nimbus protect data against a region outage?", "Cross-region replication copies new objects to a second region within 15 minutes."},
		{"Is replication of existing objects automatic?", "Existing objects are only replicated after a batch replication job is started."},
		{"How durable is Nimbus storage?", "Nimbus is designed for 99.999999999 percent durability."},
	}},
	{"kb-billing", "Billing", []fact{
		{"When am I billed?", "Invoices are issued on the first day of each month."},
		{"Which payment methods are accepted?", "Nimbus accepts credit cards and bank transfers."},
		{"Is there a free tier?", "The free tier includes 5 gigabytes of standard storage for 12 months."},
	}},
	{"kb-support", "Support plans", []fact{
		{"How fast does support answer?", "Business support answers urgent tickets within 1 hour."},
		{"Is phone support available?", "Phone support is included in the Enterprise plan only."},
		{"Where can I see service status?", "The status page shows the health of every region in real time."},
	}},
	{"kb-cli", "Command line tool", []fact{
		{"How do I install the Nimbus CLI?", "The CLI is installed with a single binary download for Linux, macOS and Windows."},
		{"How do I upload a folder with the CLI?", "The sync command uploads a folder and skips files that did not change."},
		{"Can the CLI resume interrupted uploads?", "Large uploads are split into parts and resume from the last completed part."},
	}},
	{"kb-events", "Event notifications", []fact{
		{"Can I get notified when a file is uploaded?", "Event notifications send a message to a webhook or queue when objects are created."},
		{"Which events can trigger notifications?", "Notifications can fire on object creation, deletion and restore."},
		{"Are notifications delivered in order?", "Notifications are delivered at least once and may arrive out of order."},
	}},
}

// filler pads a document to the requested size with text that supports no fact.
var filler = []string{
	"This article belongs to the Nimbus help center.",
	"Screenshots in this guide show the web console in its default theme.",
	"Related topics are linked at the end of the page.",
	"The examples use placeholder names that you should replace with your own.",
	"Contact your account team if the steps above do not match what you see.",
	"The console and the API offer the same options unless noted otherwise.",
	"Settings described here apply to all storage classes.",
	"Changes to this page are listed in the documentation changelog.",
}
